"""The holder-wide fast path of the checked read: a caller that sees every cell of its holder,
served from the recall cache's in-memory index (docs/retrieval.md).

Nothing here decrypts: a cell not yet in the cache is opened by the reader's ``open_checked``
(saihm/store/read/reader.py), and every returned item is still checked on this call.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import cast

from saihm.events import SealedPayload
from saihm.projections import Projections
from saihm.retrieval import Query, analyse_query
from saihm.retrieval.holder import rank_holder
from saihm.storage import ReadTxn
from saihm.store.auth import Access
from saihm.store.read.cache import CacheEntry, CacheView, HolderIndex, VisibleList, context_item
from saihm.store.read.candidates import covered_cells, label_allows
from saihm.store.read.views import OpenedCell, Page, RecallWindow

#: A filter on the decrypted label (namespaces, kinds), or None for every cell.
Narrow = Callable[[SealedPayload], bool] | None
#: The reader's verify-and-decrypt of one stored cell (``CheckedReader.open_checked``).
OpenChecked = Callable[[ReadTxn, Access, bytes, "bytes | None", int], "OpenedCell | None"]
#: The query that matches every cell (absent or empty).
EVERYTHING = analyse_query(None)
#: The whole answer: no limit, cursor or filter.
WHOLE = RecallWindow()


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """What one checked read asks for, on behalf of ``access`` (``CheckedReader.read_page``),
    built once by its caller: the operator's recall from the window the edge parsed, the
    store's ``read`` without one.

    ``q`` is the analysed query (the empty query: every cell, in log order); ``cell_ids`` None
    means every candidate; ``window``'s namespaces and kinds only narrow, and its ``limit`` and
    ``start`` (a leaf index to continue after for "all cells", else an offset in the ranking)
    select a window of the answer.
    """

    access: Access
    q: Query = EVERYTHING
    cell_ids: Iterable[bytes] | None = None
    include_shared: bool = True
    window: RecallWindow = WHOLE

    @property
    def limit(self) -> int | None:
        return self.window.limit

    @property
    def start(self) -> int | None:
        return self.window.start

    @property
    def narrow(self) -> Narrow:
        """The filter of the window's namespaces and kinds on the decrypted label, or None."""
        namespaces, kinds = self.window.namespaces, self.window.kinds
        if namespaces is None and kinds is None:
            return None

        def narrow(payload: SealedPayload) -> bool:
            return (namespaces is None or payload.namespace in namespaces) and (
                kinds is None or payload.kind in kinds
            )

        return narrow


def still_allowed(
    entry: CacheEntry, erased: set[bytes], access: Access, sharer: bytes | None
) -> bool:
    """Whether a cached cell may still be returned to ``access`` on this call: not erased, its
    label allowed, and, when shared (``sharer`` is the holder that shared it), still held by
    its sharer. A cell not in the cache is checked by ``open_checked`` instead."""
    cell = entry.own.cell
    is_shared = sharer is not None
    return (
        cell.cell_id not in erased
        and label_allows(access, cell, entry.own.payload, is_shared)
        and (not is_shared or cell.holder_id == sharer)
    )


def allowed_own(kept: VisibleList, erased: set[bytes], access: Access) -> list[OpenedCell]:
    """The cells of a holder's kept visible list (saihm/store/read/cache.py) that
    :func:`still_allowed` lets through to ``access`` as its own on this call: not erased, the
    label allowed, the verified owner the caller's; in the list's order.

    The same rule, every item checked: for a holder-wide access (every session, no namespace
    scope) the label check is the owner's, so the common answer (every owner the caller, no
    cell erased) is found by two C-level passes: over the owners, and over the erased cellIds
    (or the kept ones, whichever are fewer) against the other side.
    """
    ids, owners, opened = kept.ids, kept.owners, kept.opened
    if access.all_sessions and access.namespaces is None:
        holder_id = access.holder_id
        if owners.count(holder_id) == len(owners) and not kept.holds_any(erased):
            return list(opened)
        return [
            o
            for k, h, o in zip(ids, owners, opened, strict=True)
            if h == holder_id and k not in erased
        ]
    return [
        o
        for k, o in zip(ids, opened, strict=True)
        if k not in erased and label_allows(access, o.cell, o.payload, False)
    ]


def read_holder_wide(
    open_checked: OpenChecked,
    projections: Projections,
    txn: ReadTxn,
    view: CacheView,
    request: ReadRequest,
    now: int,
) -> Page | None:
    """A caller that sees every cell of its holder, from the in-memory index.

    The index holds exactly the holder's live verified cells, so ranking and statistics over it
    are over what the caller may see; each returned item is still checked on this call. None
    when the cache cannot hold the holder's cells (the caller then takes the item-by-item path).
    ``request.cell_ids`` is not consulted: the caller takes this path only when it is None.
    ``now`` is the clock (seconds) contracts are judged at.
    """
    access, q, narrow, limit = request.access, request.q, request.narrow, request.limit
    holder = view.holder(access.holder_id)
    erased = view.erased()
    shared: list[tuple[bytes, CacheEntry]] = []
    if request.include_shared and access.consumer is None:
        covered = covered_cells(projections, txn, access.holder_id, now)
        for cell_id, sharer in sorted(covered.items()):
            entry = view.get(cell_id)
            if entry is None:
                # MAC-checked (saihm/projections/seal.py): a forged record offers nothing.
                record = projections.cells.get(txn, cell_id)
                if record is None:
                    continue
                opened = open_checked(txn, access, cell_id, sharer, record.index)
                if opened is None:
                    continue
                entry = view.put(opened)
            elif not still_allowed(entry, erased, access, sharer):
                continue
            shared.append((cell_id, entry))
    failed: set[bytes] = set()
    batch: list[OpenedCell] = []
    for cell_id in list(holder.missing):
        index = holder.cells.get(cell_id) if holder.cells is not None else None
        if index is None:
            holder.missing.discard(cell_id)
            continue
        opened = open_checked(txn, access, cell_id, None, index)
        if opened is None:
            failed.add(cell_id)
        else:
            batch.append(opened)
        if len(batch) >= EMBED_BATCH:
            _put_all(view, batch)
    _put_all(view, batch)
    # Every own cell must now be in the cache (the bound may have pushed some out, or dropped
    # the holder's list): if not, this call takes the item-by-item path.
    if (
        holder.cells is None
        or holder.missing - failed
        or view.cache.holder_index(access.holder_id) is not holder
    ):
        return None
    holder_id = access.holder_id
    if q.everything:
        return _all_cells(holder, request, shared, erased, failed)
    first = request.start or 0
    need = None
    if limit is not None and view.cache.embedder is None and narrow is None:
        need = first + limit + 1
    qvec = view.query_vector(q)
    shared_ids = {k for k, _e in shared}
    entries = view.cache.entries
    table = None if qvec is None else view.vector_table(holder, shared_ids)
    theirs = [(context_item(k, e, shared=True), e.vector) for k, e in shared]
    ranked = rank_holder(holder, q, theirs, qvec, need, table=table, order=_order_in(entries))
    by_key = dict(shared)
    cells: list[OpenedCell] = []
    scores: list[float] = []
    positions: list[int] = []
    for position in range(first, len(ranked)):
        r = ranked[position]
        key = cast(bytes, r.key)  # the keys ranked are cellIds
        is_shared = key in shared_ids
        entry = by_key[key] if is_shared else entries[key]
        cell = entry.own.cell
        if cell.cell_id in erased or (narrow is not None and not narrow(entry.own.payload)):
            continue
        if not is_shared and cell.holder_id != holder_id:
            continue
        if limit is not None and len(cells) >= limit:
            return Page(cells, True, scores, positions)
        cells.append(entry.opened(is_shared))
        scores.append(r.score)
        positions.append(position + 1)
    return Page(cells, False, scores, positions)


#: Cells opened before they are embedded together (the semantic stage's batch).
EMBED_BATCH = 256


def _order_in(entries: Mapping[bytes, CacheEntry]) -> Callable[[bytes], int]:
    """The leaf index of a cached cell, for the semantic stage's ties."""

    def order(cell_id: bytes) -> int:
        return entries[cell_id].own.index

    return order


def _put_all(view: CacheView, batch: list[OpenedCell]) -> None:
    """Put ``batch`` in the cache, embedded in one model call; empties it."""
    for opened, vector in zip(batch, view.embed(batch), strict=True):
        view.put(opened, vector)
    batch.clear()


def _all_cells(
    holder: HolderIndex,
    request: ReadRequest,
    shared: list[tuple[bytes, CacheEntry]],
    erased: set[bytes],
    failed: set[bytes],
) -> Page:
    """Every cell of a holder-wide caller in log order, each checked on this call; none erased
    and none of the caller's own that ``failed`` to open on this call. The ``shared`` cells
    were checked by the caller (:func:`still_allowed`)."""
    narrow, limit, start = request.narrow, request.limit, request.start
    # The holder's kept visible list (its cached live cells in log order), each item checked
    # against the caller on this call; a cell that failed to open is not cached, so not kept.
    own = allowed_own(holder.visible, erased, request.access)
    if failed:
        own = [o for o in own if o.cell.cell_id not in failed]
    if not shared and narrow is None and limit is None and start is None:
        # The common case, kept tight: every kept cell allowed (cellIds are unique in the
        # list, so an answer as long as it is the whole list) carries the list's generation.
        visible = holder.visible
        whole = visible.generation if len(own) == len(visible) else None
        return Page(own, False, generation=whole)
    items: Iterable[OpenedCell] = own
    if shared:
        extra = sorted((e.opened(True) for _k, e in shared), key=_index)
        items = heapq.merge(own, extra, key=_index)
    found: list[OpenedCell] = []
    for opened in items:
        if start is not None and opened.index <= start:
            continue
        if narrow is not None and not narrow(opened.payload):
            continue
        if limit is not None and len(found) >= limit:
            return Page(found, True)
        found.append(opened)
    return Page(found, False)


def _index(opened: OpenedCell) -> int:
    return opened.index
