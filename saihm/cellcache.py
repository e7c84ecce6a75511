"""The in-process cache of verified cells and the per-holder retrieval index over them.

docs/retrieval.md "The cache". :class:`saihm.store.Store` owns one :class:`CellCache`; nothing
else reads it. It remembers, for cells that passed the store's full check once in this process
(cellId recomputed, signature verified, decrypted), the verified public header and the
decrypted payload, so a later read skips exactly those three steps. It never decides access:
every item a read returns is checked again against the caller on every call (erasure list,
owner / session / namespace label, an active contract for a shared cell) by the store.

Bounds and lifetime: entries are evicted least recently used beyond ``max_bytes`` (an estimate
of their memory that over-counts, measured by ``saihm bench recall``); nothing is ever written
to disk. Invalidation follows the log: before a read uses the cache, and in the committing
thread before a change is acknowledged, :meth:`CellCache.sync` reads the tree size in the
caller's read transaction and applies every leaf appended since: a FORGET drops the cell and
adds it to the in-memory erasure list; a SHARE, REVOKE, ACCEPT or DECLINE drops the cells its
contract covers; an UNGRANT drops everything of its holder; a change of the KEK generation in
force (a rotation, which retires the older ones) or a log that got shorter drops everything.
Other processes' changes are therefore seen before this process's next read.

Only :mod:`saihm.store` decrypts (tests/store/test_single_read_path.py); this module holds
what the store hands it and never opens a cell itself.
"""

from __future__ import annotations

import heapq
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from saihm.events import Cell, SealedPayload
from saihm.projections import LeafView, Projections
from saihm.retrieval import DEFAULT_WEIGHTS, Analysis, Embedder, Query, analyse
from saihm.retrieval.analysis import contains
from saihm.retrieval.bm25 import Bm25, TermIndex
from saihm.retrieval.embed import VectorTable, cosines
from saihm.retrieval.rank import Ranked, collection_stats, rank

if TYPE_CHECKING:
    from saihm.storage.base import ReadTxn
    from saihm.translog import TreeStorage

__all__ = ["CacheEntry", "CellCache", "CellHeader", "HolderIndex", "OpenedCell", "Page"]

log = logging.getLogger("saihm.store")

#: A log that grew by more than this since the last read is cheaper to forget than to replay.
REPLAY_LIMIT = 20_000
#: Operations whose subject is a contract; the cells it covers are dropped.
_CONTRACT_OPERATIONS = frozenset({"SHARE", "REVOKE", "ACCEPT", "DECLINE"})
#: Fixed per-entry overhead counted on top of the strings and terms (objects, dicts, the
#: recall element the edge renders from it): deliberately generous, so the bound over-counts
#: (measured).
ENTRY_OVERHEAD = 2_048
PER_TERM = 160  # a term of a cell: its tf entry and its posting entry
PER_INDEX_TERM = 600  # a term new to a holder's index: its posting dict and prefix entry
PER_CANDIDATE = 240  # a holder's live cell listed (cellId, index, the "missing" set)


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


@dataclass(slots=True)
class CacheEntry:
    """A verified, decrypted cell in the cache, with its analysis (and vector) for ranking."""

    own: OpenedCell
    analysis: Analysis
    size: int
    vector: Sequence[float] | None = None
    as_shared: OpenedCell | None = None

    def opened(self, shared: bool) -> OpenedCell:
        if not shared:
            return self.own
        if self.as_shared is None:
            o = self.own
            self.as_shared = OpenedCell(cell=o.cell, payload=o.payload, shared=True, index=o.index)
        return self.as_shared


@dataclass(slots=True)
class HolderIndex:
    """One holder's live cells (cellId -> leaf index, log order) and the index over the ones
    in the cache. ``cells`` is None until a holder-wide read lists them from the storage."""

    cells: dict[bytes, int] | None = None
    index: TermIndex = field(default_factory=TermIndex)
    texts: dict[bytes, str] = field(default_factory=dict)
    missing: set[bytes] = field(default_factory=set)
    #: The indexed cells' vectors stacked for the semantic stage; None after any change.
    table: VectorTable | None = None

    def add(self, cell_id: bytes, analysis: Analysis) -> int:
        """Index a cached cell; returns the bytes the index grew by (estimated)."""
        self.table = None
        new = self.index.add(cell_id, analysis.tf, analysis.length)
        self.texts[cell_id] = analysis.folded
        self.missing.discard(cell_id)
        return PER_INDEX_TERM * new

    def remove(self, cell_id: bytes, analysis: Analysis) -> int:
        """Unindex a cell; returns the bytes the index shrank by (estimated)."""
        self.table = None
        self.texts.pop(cell_id, None)
        return PER_INDEX_TERM * self.index.remove(cell_id, analysis.tf)

    def index_bytes(self) -> int:
        return PER_INDEX_TERM * len(self.index.postings)


@dataclass(frozen=True, slots=True)
class Page:
    """A window of a recall: ``cells`` in order, and ``more`` when items remain after it.

    For a query, ``scores`` holds each cell's relevance and ``positions`` the offset in the
    ranking that a page stopping after that cell continues from; for "all cells" both are
    None and a page continues after the last cell's leaf index.
    """

    cells: list[OpenedCell]
    more: bool
    scores: list[float] | None = None
    positions: list[int] | None = None

    def resume(self, i: int) -> int:
        """Where a page that ends after ``cells[i]`` continues from."""
        return self.cells[i].index if self.positions is None else self.positions[i]


def _estimate(opened: OpenedCell, analysis: Analysis, vector: Sequence[float] | None) -> int:
    content = opened.payload.content
    size = ENTRY_OVERHEAD + 2 * sys.getsizeof(content) + sys.getsizeof(analysis.folded)
    size += PER_TERM * len(analysis.tf) + sum(len(t) for t in analysis.tf)
    if vector is not None:
        size += 32 * len(vector) + 64
    return size


class CellCache:
    """Bounded (bytes, LRU) cache of verified cells, per-holder indexes and the erasure list
    mirror, kept in step with the log. Thread-safe: every method runs under one lock."""

    def __init__(self, max_bytes: int, embedder: Embedder | None = None) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self.embedder = embedder
        self.lock = threading.RLock()
        self._entries: OrderedDict[bytes, CacheEntry] = OrderedDict()
        self._bytes = 0
        self._holders: dict[bytes, HolderIndex] = {}
        self._erased: set[bytes] | None = None
        self._synced: int | None = None
        self._kek: int | None = None
        self._candidate_bytes = 0
        self._projections: Projections  # set by bind() before any sync or read

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def used_bytes(self) -> int:
        """The estimate the bound is enforced on: entries, holders' cell lists and indexes."""
        return self._bytes + self._candidate_bytes

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> Mapping[bytes, CacheEntry]:
        """The cached cells by cellId (read under the lock, as by a :class:`CacheView`)."""
        return self._entries

    def holder_index(self, holder_id: bytes) -> HolderIndex | None:
        """The holder's index, or None when the cache holds none for it."""
        return self._holders.get(holder_id)

    def clear(self) -> None:
        """Drop every entry, index, cell list and the erasure mirror."""
        with self.lock:
            self._entries.clear()
            self._holders.clear()
            self._bytes = 0
            self._candidate_bytes = 0
            self._erased = None
            self._synced = None

    # -- following the log ----------------------------------------------------------------

    def sync(self, txn: ReadTxn, tree: TreeStorage, kek_version: int) -> int:
        """Apply every leaf appended since the last sync, as seen in ``txn``; return the size.

        The caller holds :attr:`lock`. See the module docstring for what each leaf drops.
        """
        size = tree.size(txn)
        if self._kek != kek_version:
            self.clear()
            self._kek = kek_version
        synced = self._synced
        if synced is None or size - synced > REPLAY_LIMIT:
            if synced is not None:
                self.clear()
            self._synced = size
            return size
        if size <= synced:
            # An older snapshot than the last sync (a read that began before another thread
            # synced): the caller's view is marked stale and may not add to the cache.
            return size
        for offset, leaf in enumerate(tree.leaves(txn, synced, size)):
            self._apply(txn, synced + offset, LeafView.from_leaf(leaf))
        self._synced = size
        return size

    def _apply(self, txn: ReadTxn, index: int, leaf: LeafView) -> None:
        op = leaf.operation
        if op == "REMEMBER":
            holder = self._holders.get(leaf.holder_id)
            if holder is not None and holder.cells is not None:
                holder.cells[leaf.subject_id] = index
                holder.missing.add(leaf.subject_id)
                self._candidate_bytes += PER_CANDIDATE
        elif op == "FORGET":
            if self._erased is not None:
                self._erased.add(leaf.subject_id)
            self._drop(leaf.subject_id, forget=True)
        elif op in _CONTRACT_OPERATIONS:
            # MAC-checked: a forged contract covers nothing, so it has nothing to drop.
            contract = self._projections.contracts.get(txn, leaf.subject_id)
            if contract is not None:
                for cell_id in contract.shards:
                    self._drop(cell_id)
        elif op == "UNGRANT":
            self._drop_holder(leaf.holder_id)

    def bind(self, projections: Projections) -> None:
        """Give the cache the store's projections (it only reads them)."""
        self._projections = projections

    def _drop(self, cell_id: bytes, *, forget: bool = False) -> None:
        entry = self._entries.pop(cell_id, None)
        owner = None
        if entry is not None:
            self._bytes -= entry.size
            owner = entry.own.cell.holder_id
            holder = self._holders.get(owner)
            if holder is not None:
                self._candidate_bytes -= holder.remove(cell_id, entry.analysis)
                if not forget and holder.cells is not None and cell_id in holder.cells:
                    holder.missing.add(cell_id)
        if forget:
            for holder in self._holders.values() if owner is None else [self._holders.get(owner)]:
                if holder is None or holder.cells is None:
                    continue
                if holder.cells.pop(cell_id, None) is not None:
                    self._candidate_bytes -= PER_CANDIDATE
                holder.missing.discard(cell_id)

    def _drop_holder(self, holder_id: bytes) -> None:
        holder = self._holders.pop(holder_id, None)
        if holder is not None and holder.cells is not None:
            self._candidate_bytes -= PER_CANDIDATE * len(holder.cells)
        if holder is not None:
            self._candidate_bytes -= holder.index_bytes()
        for cell_id in [k for k, e in self._entries.items() if e.own.cell.holder_id == holder_id]:
            entry = self._entries.pop(cell_id)
            self._bytes -= entry.size

    # -- reading --------------------------------------------------------------------------

    @contextmanager
    def reading(self, txn: ReadTxn, tree: TreeStorage, kek_version: int) -> Iterator[CacheView]:
        """Hold the lock, sync to ``txn``, and yield a view for one read."""
        with self.lock:
            size = self.sync(txn, tree, kek_version)
            yield CacheView(self, txn, size)

    def _erased_set(self, txn: ReadTxn) -> set[bytes]:
        if self._erased is None:
            self._erased = self._projections.cells.erased_ids(txn)
        return self._erased

    def _holder_cells(self, txn: ReadTxn, holder_id: bytes) -> HolderIndex:
        holder = self._holders.setdefault(holder_id, HolderIndex())
        if holder.cells is None:
            cells: dict[bytes, int] = {
                cell_id: index
                for index, cell_id in self._projections.cells.live_of_holder(txn, holder_id)
            }
            holder.cells = cells
            holder.missing = set()
            for cell_id in cells:
                entry = self._entries.get(cell_id)
                if entry is None:
                    holder.missing.add(cell_id)
                elif cell_id not in holder.index:
                    self._candidate_bytes += holder.add(cell_id, entry.analysis)
            self._candidate_bytes += PER_CANDIDATE * len(cells)
        return holder

    def _put(self, opened: OpenedCell, vector: Sequence[float] | None = None) -> CacheEntry:
        analysis = analyse(opened.payload.content)
        if vector is None and self.embedder is not None:
            vector = self.embedder.embed([opened.payload.content])[0]
        own = (
            opened
            if not opened.shared
            else OpenedCell(
                cell=opened.cell, payload=opened.payload, shared=False, index=opened.index
            )
        )
        entry = CacheEntry(
            own=own, analysis=analysis, size=_estimate(own, analysis, vector), vector=vector
        )
        cell_id = own.cell.cell_id
        old = self._entries.pop(cell_id, None)
        if old is not None:
            self._bytes -= old.size
        self._entries[cell_id] = entry
        self._bytes += entry.size
        holder = self._holders.get(own.cell.holder_id)
        if holder is not None and holder.cells is not None and cell_id in holder.cells:
            self._candidate_bytes += holder.add(cell_id, analysis)
        self._evict()
        return entry

    def _evict(self) -> None:
        while self._entries and self.used_bytes > self.max_bytes:
            cell_id, entry = self._entries.popitem(last=False)
            self._bytes -= entry.size
            holder = self._holders.get(entry.own.cell.holder_id)
            if holder is not None:
                self._candidate_bytes -= holder.remove(cell_id, entry.analysis)
                if holder.cells is not None and cell_id in holder.cells:
                    holder.missing.add(cell_id)
        if self.used_bytes > self.max_bytes:
            # Cell lists alone exceed the bound: forget them too (they are rebuilt on demand).
            for holder_id in list(self._holders):
                self._drop_holder(holder_id)


class CacheView:
    """The cache as one read sees it: synced to the read's transaction, under the lock."""

    def __init__(self, cache: CellCache, txn: ReadTxn, size: int) -> None:
        self.cache = cache
        self.txn = txn
        self.size = size
        #: The snapshot is the one the cache is synced to: only then may the read add cells
        #: (a cell erased after an older snapshot must not come back) or list a holder's cells.
        self.current = cache.enabled and size == cache._synced

    def erased(self) -> set[bytes]:
        """The erasure list at (or after) this read's snapshot: a superset is only safer.

        A stale view reads its own snapshot's list and does not keep it.
        """
        if self.current or self.cache._erased is not None:
            return self.cache._erased_set(self.txn)
        return self.cache._projections.cells.erased_ids(self.txn)

    def get(self, cell_id: bytes) -> CacheEntry | None:
        """The cached entry of a verified cell, or None."""
        entry = self.cache._entries.get(cell_id)
        if entry is None:
            return None
        self.cache._entries.move_to_end(cell_id)
        return entry

    def embed(self, opened: Sequence[OpenedCell]) -> list[Sequence[float] | None]:
        """The semantic stage's vectors of ``opened`` in one model call (batched: far cheaper
        than one call each), or None each without an embedder; for :meth:`put`."""
        embedder = self.cache.embedder
        if embedder is None or not opened:
            return [None] * len(opened)
        return list(embedder.embed([o.payload.content for o in opened]))

    def put(self, opened: OpenedCell, vector: Sequence[float] | None = None) -> CacheEntry:
        """Remember a cell the store just verified and decrypted (if this view is current),
        with its ``vector`` if :meth:`embed` made it already."""
        if not self.current:
            analysis = analyse(opened.payload.content)
            if vector is None and self.cache.embedder is not None:
                vector = self.cache.embedder.embed([opened.payload.content])[0]
            return CacheEntry(own=opened, analysis=analysis, size=0, vector=vector)
        return self.cache._put(opened, vector)

    def holder(self, holder_id: bytes) -> HolderIndex:
        """The holder's live cell list (built from the storage on first use) and index."""
        return self.cache._holder_cells(self.txn, holder_id)

    def query_vector(self, query: Query) -> Sequence[float] | None:
        embedder = self.cache.embedder
        if embedder is None or query.everything:
            return None
        return embedder.embed([query.text])[0]

    def rank_holder(
        self,
        holder: HolderIndex,
        query: Query,
        shared: list[tuple[bytes, CacheEntry]],
        qvec: Sequence[float] | None,
        need: int | None,
    ) -> list[Ranked]:
        """Rank the holder's indexed cells and ``shared`` for ``query``, best first.

        Precondition: the index holds every live cell of the holder (the caller opened the
        missing ones), which a holder-wide caller may all see; the statistics are those of
        exactly the ranked set: the index plus ``shared``. With ``need`` (and no semantic
        stage) only the best ``need`` are kept, by a heap.
        """
        index = holder.index
        terms = query.terms
        base = index.stats(terms)
        stats = base
        if shared:
            # The shared cells join the statistics (and may bring expansion terms).
            extra = collection_stats(query, [(k, e.analysis, 0) for k, e in shared])
            wanted = {*base.df, *extra.df}
            df = {t: len(index.postings.get(t, ())) + extra.df.get(t, 0) for t in wanted}
            expansions = {
                t: tuple(sorted({*base.expansions.get(t, ()), *extra.expansions.get(t, ())}))
                for t in {*base.expansions, *extra.expansions}
            }
            n = base.n + len(shared)
            total = index.total_length + sum(e.analysis.length for _k, e in shared)
            stats = Bm25(n=n, avgdl=total / n if n else 0.0, df=df, expansions=expansions)
        entries = self.cache._entries
        # A holder's index is keyed by cell id only (HolderIndex.add is its one writer, with bytes).
        matched = cast(set[bytes], index.candidates(terms))
        first, rest = query.containment[0], query.containment[1:]
        # The containment baseline over the cells that share no term: a C-level substring
        # scan over the case-folded texts, then the remaining terms on the few that pass.
        for cell_id, text in holder.texts.items():
            if first in text and cell_id not in matched and all(t in text for t in rest):
                matched.add(cell_id)
        docs = [(k, entries[k].analysis, entries[k].own.index) for k in matched]
        docs.extend((k, e.analysis, e.own.index) for k, e in shared)
        if qvec is not None:
            # The semantic stage: the cosine of every cell the caller may see, indexed or shared.
            # The indexed cells' vectors are stacked once per change of the index, not per query.
            if holder.table is None:
                holder.table = VectorTable(
                    [(k, v) for k in holder.texts if (v := entries[k].vector) is not None]
                )
            w = DEFAULT_WEIGHTS
            near = holder.table.nearest(qvec, w.floor, w.dense_k, matched)
            # The table's keys are the holder's cell ids (bytes).
            dense = [(k, c, entries[cast(bytes, k)].own.index) for k, c in near.items()]
            have = [(k, e.vector, e.own.index) for k, e in shared if e.vector is not None]
            sims = cosines(qvec, [v for _k, v, _i in have])
            dense.extend((k, c, i) for (k, _v, i), c in zip(have, sims, strict=True))
            return rank(query, docs, stats=stats, dense=dense, matched=True)
        if need is None:
            return rank(query, docs, stats=stats, matched=True)
        scored = []
        for key, analysis, order in docs:
            tf = analysis.tf
            shares = any(t in tf for t in terms)
            if shares or contains(query, analysis):
                score = stats.score(tf, analysis.length, terms) if shares else 0.0
                scored.append(Ranked(key, score, order))
        return heapq.nsmallest(need, scored, key=lambda r: (-r.score, r.order))
