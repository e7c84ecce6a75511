"""The recall element's JSON form and the edge's recall rendering cache.

Each tool's "Result" renderer lives in its family module (:mod:`saihm.protocol.memory`,
:mod:`~saihm.protocol.sharing`, :mod:`~saihm.protocol.governance`); this module holds what
saihm_recall's renderer shares with every caller: the protocol's recall element of a verified
cell (ids as lowercase hex, numbers that can exceed 2^53 - 1 as decimal strings), rendered once
per verified cell and kept in :class:`RecallItems`, the edge's rendering cache keyed by cell id.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from saihm.protocol.params import dec, hx

if TYPE_CHECKING:
    from saihm.store import OpenedCell, Page

__all__ = [
    "MAX_RECALL_ITEMS",
    "RecallAnswer",
    "RecallItem",
    "RecallItems",
    "item_bytes",
    "recall_item",
]

#: The most recall elements one :class:`RecallItems` keeps. An element lives only as long as
#: the verified cell it was rendered from, so the store's cache bounds them first; this is the
#: bound of last resort.
MAX_RECALL_ITEMS = 1_000_000


class RecallItem(dict[str, Any]):
    """One recall element that cannot be changed: the binding hands out the same object to
    every caller that may see the cell (it is kept in :class:`RecallItems`), so a caller that
    tried to edit it would edit everyone's answer. Copy it (``dict(item)``) to edit."""

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a recall item is read-only; copy it with dict(item)")

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        return (dict, (dict(self),))


class RecallAnswer(list[Mapping[str, Any]]):
    """A recall's JSON array, with the binding's extension metadata beside it: ``cut`` (items
    remain beyond this answer) and ``next_cursor`` (pass it as ``cursor`` to continue)."""

    cut: bool = False
    next_cursor: str | None = None


def item_bytes(item: Mapping[str, Any]) -> int:
    """The UTF-8 size of one element as the binding sends it, with its separating comma."""
    return len(json.dumps(item, separators=(",", ":")).encode("utf-8")) + 1


def recall_item(opened: OpenedCell) -> RecallItem:
    """The protocol's recall element for a verified cell (saihm_recall "Result"), with the
    extensions ``kind``, ``namespace`` and ``sessionId``, and, when the cell has them,
    ``supersedes`` (the cellId of the cell it replaced: ``saihm_remember``'s ``supersedes``)
    and ``metadata`` (the writer's structure kept beside ``plaintext``, a JSON object)."""
    cell, payload = opened.cell, opened.payload
    extra: dict[str, Any] = {}
    if payload.supersedes is not None:
        extra["supersedes"] = hx(payload.supersedes)
    if payload.metadata is not None:
        extra["metadata"] = json.loads(payload.metadata)
    return RecallItem(
        cellId=hx(cell.cell_id),
        plaintext=payload.content,
        holderIdHex=hx(cell.holder_id),
        cellNonce=hx(cell.cell_nonce),
        kekVersion=cell.kek_version,
        holderSignaturePrefix=hx(cell.signature_prefix),
        timestamp=dec(cell.timestamp),
        tier=cell.tier,
        kind=payload.kind,
        namespace=payload.namespace,
        sessionId=hx(payload.session_id),
        **extra,
    )


@dataclass(frozen=True, slots=True)
class _Rendered:
    source: weakref.ref[OpenedCell]
    item: RecallItem


class RecallItems:
    """The edge's rendering cache: the recall element of a verified cell, keyed by cell id.

    It is asked only about a cell the store's read path has just returned to this caller (the
    item-by-item check already passed), so it never decides who may see a cell. An element is
    served again only for the very verified cell it was rendered from (the same header and
    payload objects the store's cache holds), and is dropped when that cell leaves the store's
    cache: an erased cell's rendering goes with it, and a cell id read again after erasure or
    eviction is rendered afresh. At most ``bound`` elements are kept (oldest dropped first).

    A page that is a holder's whole kept visible list (``Page.generation`` set) is rendered
    once per generation of that list: the elements are kept, weakly keyed to the generation,
    until the list changes (any cell kept, replaced or let go, as by an erasure or an
    eviction, gives it a new generation and the old one is dropped with its elements).
    """

    def __init__(self, bound: int = MAX_RECALL_ITEMS) -> None:
        if bound < 1:
            raise ValueError("a rendering cache holds at least one element")
        self.bound = bound
        self._entries: dict[bytes, _Rendered] = {}
        self._wholes: weakref.WeakKeyDictionary[object, tuple[RecallItem, ...]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, cell_id: object) -> bool:
        return cell_id in self._entries

    def item(self, opened: OpenedCell) -> RecallItem:
        """The recall element of ``opened``, rendered once while its verified cell lives."""
        cell_id = opened.cell.cell_id
        entry = self._entries.get(cell_id)
        if entry is not None:
            source = entry.source()
            # The store's shared view of a cell is another OpenedCell over the same header
            # and payload; the element does not depend on it.
            if source is not None and (
                source is opened
                or (source.cell is opened.cell and source.payload is opened.payload)
            ):
                return entry.item
        item = recall_item(opened)
        self._keep(cell_id, opened, item)
        return item

    def items(self, cells: Iterable[OpenedCell]) -> list[RecallItem]:
        """:meth:`item` of each of ``cells``, in order, in one loop (an answer may hold
        thousands of elements, most already rendered)."""
        entries = self._entries
        out: list[RecallItem] = []
        append = out.append
        for opened in cells:
            entry = entries.get(opened.cell.cell_id)
            if entry is not None:
                source = entry.source()
                if source is opened or (
                    source is not None
                    and source.cell is opened.cell
                    and source.payload is opened.payload
                ):
                    append(entry.item)
                    continue
            append(self.item(opened))
        return out

    def page_items(self, page: Page) -> Sequence[RecallItem]:
        """:meth:`items` of ``page.cells``; for a whole kept visible list, rendered once per
        generation of that list (the same cells, the same objects, the same elements)."""
        generation = page.generation
        if generation is None:
            return self.items(page.cells)
        kept = self._wholes.get(generation)
        if kept is not None and len(kept) == len(page.cells):
            return kept
        rendered = tuple(self.items(page.cells))
        with self._lock:
            self._wholes[generation] = rendered
        return rendered

    def _keep(self, cell_id: bytes, opened: OpenedCell, item: RecallItem) -> None:
        entries = self._entries

        def gone(ref: weakref.ref[OpenedCell]) -> None:
            # The verified cell left the store's cache: its rendering goes too (unless a
            # newer one has replaced it, which lives by its own cell).
            current = entries.get(cell_id)
            if current is not None and current.source is ref:
                entries.pop(cell_id, None)

        rendered = _Rendered(weakref.ref(opened, gone), item)
        with self._lock:
            while cell_id not in entries and len(entries) >= self.bound:
                try:
                    oldest = next(iter(entries))
                except (StopIteration, RuntimeError):
                    # Emptied or changed under the iterator by a callback above: retry.
                    continue
                entries.pop(oldest, None)
            entries[cell_id] = rendered
