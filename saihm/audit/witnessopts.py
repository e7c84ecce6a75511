"""The witness policy of ``saihm verify`` and ``saihm monitor``: C2SP tlog-witness
cosignatures over the log's checkpoints (the options are parsed in saihm.commands.audit).
"""

from __future__ import annotations

from saihm.audit.report import Report
from saihm.errors import SaihmError

__all__ = ["check_witnesses"]


def check_witnesses(
    report: Report, notes: list[bytes], keys: list[str], need: int, *, every: bool
) -> None:
    """Record in ``report`` whether enough of ``keys`` cosigned: each of ``notes`` when
    ``every`` (held checkpoints), else the newest of ``notes`` cosigned by any of ``keys``."""
    from saihm.translog.witness import verify_cosignatures

    try:
        if every:
            for note in notes:
                names = verify_cosignatures(note, keys, need)
        else:
            names = []
            for note in reversed(notes):
                names = verify_cosignatures(note, keys, 0)
                if names:
                    break
            if not names:
                raise SaihmError("no checkpoint carries a cosignature of the given witnesses")
            names = verify_cosignatures(note, keys, need)
        size = int(note.split(b"\n", 2)[1])
        report.notes.append(
            f"witnesses: size {size} cosigned by {', '.join(names)} ({need} required)"
        )
    except SaihmError as err:
        report.fail("witnesses", str(err))
