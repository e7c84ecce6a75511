"""``--witness`` and ``--min-witnesses``: the witness policy shared by ``saihm verify`` and
``saihm monitor`` (C2SP tlog-witness cosignatures over the log's checkpoints).
"""

from __future__ import annotations

import argparse

from saihm.audit.report import Report
from saihm.errors import SaihmError

__all__ = ["add_witness_options", "check_witnesses", "witness_policy"]


def add_witness_options(parser: argparse.ArgumentParser) -> None:
    """``--witness VKEY`` (repeatable) and ``--min-witnesses N`` (verify and monitor)."""
    parser.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="VKEY",
        help="a witness verifier key (type 0x04 cosignature/v1 or 0x06 ML-DSA-44; "
        "repeatable; a witness may be given both of its keys, one option each)",
    )
    parser.add_argument(
        "--min-witnesses",
        type=int,
        default=None,
        metavar="N",
        help="fail unless at least N of the --witness witnesses cosigned (a witness given "
        "with two keys counts once, either key's line will do; default 1 with --witness)",
    )


def witness_policy(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> int:
    """Check ``--witness``/``--min-witnesses`` (a usage error exits 2); return N."""
    from saihm.translog.witness import group_witness_keys, witness_verifier

    if opts.min_witnesses is not None and not opts.witness:
        parser.error("--min-witnesses needs --witness")
    verifiers = []
    for key in opts.witness:
        try:
            verifiers.append(witness_verifier(key))
        except SaihmError as err:
            parser.error(f"--witness {key[:40]}: {err}")
    try:
        witnesses = group_witness_keys(verifiers)
    except SaihmError as err:
        parser.error(f"--witness: {err}")
    need = 1 if opts.min_witnesses is None else opts.min_witnesses
    if opts.witness and not 0 <= need <= len(witnesses):
        parser.error("--min-witnesses must be 0..the number of --witness witnesses")
    return need


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
