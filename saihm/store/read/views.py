"""The read path's result types: what the checked read path hands out, and the window asked.

:class:`OpenedCell` is a cell that passed every check of the read path (its
:class:`CellHeader` and decrypted payload); a :class:`Page` is a window of a recall. They are
produced by the store (saihm/store/read/reader.py) and rendered at the edge (saihm/protocol).
A :class:`RecallWindow` is the part of a recall the caller asked for, parsed at the edge
(saihm/protocol/window.py) and carried unchanged into the read (``ReadRequest.window``).
"""

from __future__ import annotations

from dataclasses import dataclass

from saihm.events import Cell, SealedPayload

__all__ = ["CellHeader", "OpenedCell", "Page", "RecallWindow"]


@dataclass(frozen=True, slots=True)
class CellHeader:
    """The public fields of a verified cell (saihm-protocol "Wire formats", keys 1..5, 8) and
    the leading 16 bytes of its signature; ciphertext and full signature are not kept."""

    cell_id: bytes
    holder_id: bytes
    kek_version: int
    tier: str
    cell_nonce: bytes
    signature_prefix: bytes
    timestamp: int

    @classmethod
    def of(cls, cell: Cell) -> CellHeader:
        return cls(
            cell.cell_id,
            cell.holder_id,
            cell.kek_version,
            cell.tier,
            cell.cell_nonce,
            bytes(cell.signature[:16]),
            cell.timestamp,
        )


@dataclass(frozen=True)
class OpenedCell:
    """A cell that passed every check of the read path, with its decrypted payload.

    The cache hands out the same object while the cell stays in it, so an edge may key a
    derived form of the cell to this object (:class:`saihm.protocol.RecallItems` keeps the
    rendered recall element until the object is gone).
    """

    cell: CellHeader
    payload: SealedPayload
    shared: bool
    index: int


@dataclass(frozen=True, slots=True)
class Page:
    """A window of a recall: ``cells`` in order, and ``more`` when items remain after it.

    For a query, ``scores`` holds each cell's relevance and ``positions`` the offset in the
    ranking that a page stopping after that cell continues from; for "all cells" both are
    None and a page continues after the last cell's leaf index. ``generation`` is set when
    ``cells`` is a holder's whole kept visible list, every item allowed on this call: that
    list's generation (saihm/store/read/cache.py ``VisibleList``), the same object for the same
    cells until the list changes.
    """

    cells: list[OpenedCell]
    more: bool
    scores: list[float] | None = None
    positions: list[int] | None = None
    generation: object | None = None

    def resume(self, i: int) -> int:
        """Where a page that ends after ``cells[i]`` continues from."""
        return self.cells[i].index if self.positions is None else self.positions[i]


@dataclass(frozen=True, slots=True)
class RecallWindow:
    """What part of a recall the caller asked for (docs/retrieval.md "Extension params"); the
    default is all of it. ``start`` is the position a cursor names (a leaf index for "all
    cells", an offset in the ranking for a query); ``max_bytes`` bounds the rendered answer,
    which only the binding can measure. :mod:`saihm.protocol.window` parses it from JSON."""

    limit: int | None = None
    max_bytes: int | None = None
    start: int | None = None
    namespaces: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
