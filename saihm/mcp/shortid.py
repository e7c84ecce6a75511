"""Short cell ids in the recall report, and their expansion when the agent hands one back.

A cellId is 64 hexadecimal characters; printed ten times it is most of a recall report. The
report shows the shortest prefix of at least :data:`MIN_SHORT` characters that tells the
report's cells apart (:func:`short_ids`), and the client keeps every full cellId it has
reported (:class:`KnownIds`) so that saihm_forget and saihm_share take either form. Only the
client does this: the operator always receives the full cellId, so the protocol's checks of
each answer (the erasure rule among them) are unchanged. An id that is not 64 hexadecimal
characters is never shortened.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from saihm.mcp.checks import Refused

__all__ = ["MIN_SHORT", "KnownIds", "short_ids"]

#: The shortest prefix shown: 32 bits, so two cells of one report rarely need more.
MIN_SHORT = 8
_FULL = re.compile(r"[0-9a-f]{64}")
_PREFIX = re.compile(rf"[0-9a-fA-F]{{{MIN_SHORT},63}}")
#: Full ids a client remembers; the oldest are forgotten first beyond this.
MAX_KNOWN = 100_000


def short_ids(ids: Iterable[str]) -> dict[str, str]:
    """Each id's shortest unique prefix among ``ids`` (at least :data:`MIN_SHORT` characters);
    an id that is not 64 lowercase hexadecimal characters maps to itself."""
    full = sorted({i for i in ids if _FULL.fullmatch(i)})
    out = {i: i for i in ids}
    for n, cell_id in enumerate(full):
        length = MIN_SHORT
        for other in (full[n - 1] if n else None, full[n + 1] if n + 1 < len(full) else None):
            if other is not None:
                common = next(
                    (k for k, (a, b) in enumerate(zip(cell_id, other, strict=True)) if a != b), 64
                )
                length = max(length, common + 1)
        out[cell_id] = cell_id[:length]
    return out


class KnownIds:
    """The full cellIds this client has reported, to expand the short ids it printed."""

    def __init__(self, bound: int = MAX_KNOWN) -> None:
        self._ids: dict[str, None] = {}
        self._bound = bound

    def add(self, ids: Iterable[str | None]) -> None:
        """Remember each full (64 hexadecimal characters) id in ``ids``."""
        for cell_id in ids:
            if cell_id is not None and _FULL.fullmatch(cell_id):
                self._ids.pop(cell_id, None)
                self._ids[cell_id] = None
        while len(self._ids) > self._bound:
            del self._ids[next(iter(self._ids))]

    def expand(self, value: str) -> str:
        """The full cellId a short id stands for; any other value is returned unchanged.

        A value of 8 to 63 hexadecimal characters that begins exactly one known id is that id.
        One that begins several is refused (:class:`Refused`, nothing sent); one that begins
        none is sent as given, and the operator answers for it.
        """
        if not isinstance(value, str) or not _PREFIX.fullmatch(value):
            return value
        prefix = value.lower()
        matches = [cell_id for cell_id in self._ids if cell_id.startswith(prefix)]
        if len(matches) > 1:
            raise Refused(
                f"the short id {prefix} begins {len(matches)} cells this client has reported; "
                "give more of the cellId (the structured result has each in full)"
            )
        return matches[0] if matches else value
