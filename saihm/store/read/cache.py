"""The in-process cache of verified cells and the per-holder retrieval index over them.

docs/retrieval.md "The cache". :class:`saihm.store.Store` owns one :class:`CellCache`; nothing
else reads it. It remembers, for cells that passed the store's full check once in this process
(cellId recomputed, signature verified, decrypted), the verified public header and the
decrypted payload, so a later read skips exactly those three steps. It never decides access:
every item a read returns is checked again against the caller on every call (erasure list,
owner / session / namespace label, an active contract for a shared cell) by the store. It
never ranks either: it keeps the data a holder-wide read ranks from (the holder's index, the
vectors it stacks per holder, the query vectors) and :mod:`saihm.retrieval.holder` ranks.

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

import logging
import sys
import threading
from bisect import bisect_left
from collections import OrderedDict, deque
from collections.abc import Container, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from saihm.events.operations import BY_NAME, Effect
from saihm.projections import LeafView, Projections
from saihm.retrieval import Analysis, Embedder, Query, analyse
from saihm.retrieval.bm25 import TermIndex
from saihm.retrieval.context import TURN_KINDS, WINDOW, Item
from saihm.retrieval.embed import VectorTable
from saihm.store.read.views import OpenedCell

if TYPE_CHECKING:
    from saihm.storage.base import ReadTxn
    from saihm.translog import TreeStorage

__all__ = ["CacheEntry", "CacheView", "CellCache", "HolderIndex", "VisibleList", "context_item"]

log = logging.getLogger("saihm.store")

#: A log that grew by more than this since the last read is cheaper to forget than to replay.
REPLAY_LIMIT = 20_000
#: What each operation does to its subject (the registry's :class:`Effect`), by leaf name.
_EFFECTS = {name: spec.effect for name, spec in BY_NAME.items()}
#: Effects on a contract: the cells it covers are dropped.
_CONTRACT_EFFECTS = frozenset({Effect.OPENS_CONTRACT, Effect.UPDATES_CONTRACT})
#: Fixed per-entry overhead counted on top of the strings and terms (objects, dicts, the
#: recall element the edge renders from it): deliberately generous, so the bound over-counts
#: (measured).
ENTRY_OVERHEAD = 2_048
PER_TERM = 160  # a term of a cell: its tf entry and its posting entry
PER_INDEX_TERM = 600  # a term new to a holder's index: its posting dict and prefix entry
PER_CANDIDATE = 240  # a holder's live cell listed (cellId, index, the "missing" set)
#: An indexed cell's place in its session's order (retrieval.context.Item) and in the kept
#: visible list (four list slots).
PER_ITEM = 300
#: Cells written since the embedding worker last looked that it is told about (the newest).
WRITTEN_MAX = 4_096
#: Query vectors kept, by query text (an agent asks the same question again): memory only,
#: dropped with the cache; about 2 KB each beside the text, outside the bound.
QUERIES_MAX = 64


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


class Generation:
    """One generation of a :class:`VisibleList`: compared by identity, weakly referable."""

    __slots__ = ("__weakref__",)


class VisibleList:
    """A holder's indexed cells in log order, as parallel lists (so that a holder-wide read
    checks every item in a few C-level passes: saihm/store/read/holderwide.py ``allowed_own``):
    ``opened`` the verified opened cells, ``ids`` and ``owners`` their verified cells' own
    cellId and owner fields (the very objects), ``orders`` their leaf indexes. Leaf indexes
    are hints from the projections, so cells with equal ones are told apart by cellId.

    Every change is O(1), so the bound's evictions stay cheap: a cell is appended (kept out
    of log order when a cold read opens missing cells in any order, or again when replaced),
    and a removed or replaced cell's old place is only forgotten in ``_live``; the lists are
    compacted and sorted once, when next read (or when they hold twice the live cells).
    """

    __slots__ = ("_clean", "_generation", "_ids", "_live", "_opened", "_orders", "_owners")

    def __init__(self) -> None:
        self._ids: list[bytes] = []
        self._owners: list[bytes] = []
        self._opened: list[OpenedCell] = []
        self._orders: list[int] = []
        #: The kept cell of each cellId; a list place holding another object is stale.
        self._live: dict[bytes, OpenedCell] = {}
        self._clean = True
        self._generation = Generation()

    def __len__(self) -> int:
        return len(self._live)

    @property
    def generation(self) -> Generation:
        """This list's contents as of now: a new object on every change (a cell kept,
        replaced or let go), so an edge may key a derived form of the whole list to it
        (weakly: :class:`saihm.protocol.RecallItems`), and it is dropped with its list."""
        return self._generation

    @property
    def ids(self) -> list[bytes]:
        self._settle()
        return self._ids

    @property
    def owners(self) -> list[bytes]:
        self._settle()
        return self._owners

    @property
    def opened(self) -> list[OpenedCell]:
        self._settle()
        return self._opened

    @property
    def orders(self) -> list[int]:
        self._settle()
        return self._orders

    def holds_any(self, cell_ids: AbstractSet[bytes]) -> bool:
        """Whether any kept cell's cellId is one of ``cell_ids`` (the same answer as a pass
        over :attr:`ids`, found by walking the smaller side: usually ``cell_ids``)."""
        return not self._live.keys().isdisjoint(cell_ids)

    def insert(self, order: int, opened: OpenedCell) -> None:
        """Keep ``opened`` at its place in log order (in place of a kept cell of its id)."""
        cell_id = opened.cell.cell_id
        if cell_id in self._live or (self._orders and order < self._orders[-1]):
            self._clean = False
        self._live[cell_id] = opened
        self._generation = Generation()
        self._orders.append(order)
        self._ids.append(cell_id)
        self._owners.append(opened.cell.holder_id)
        self._opened.append(opened)
        self._compact_if_sparse()

    def replace(self, order: int, opened: OpenedCell) -> None:
        """Keep ``opened`` in the place of the kept cell with its cellId."""
        self.insert(order, opened)

    def remove(self, cell_id: bytes, order: int) -> None:
        """Let go of the kept cell ``cell_id`` (kept at leaf index ``order``)."""
        if self._live.pop(cell_id, None) is not None:
            self._generation = Generation()
            self._clean = False
            self._compact_if_sparse()

    def _compact_if_sparse(self) -> None:
        if len(self._ids) > 2 * len(self._live) + 64:
            self._settle()

    def _settle(self) -> None:
        """Drop stale places and sort by leaf index (stable: equal ones in arrival order)."""
        if self._clean:
            return
        live, ids, opened, orders = self._live, self._ids, self._opened, self._orders
        keep = [i for i, k in enumerate(ids) if live.get(k) is opened[i]]
        keep.sort(key=orders.__getitem__)
        self._orders = [orders[i] for i in keep]
        self._ids = [ids[i] for i in keep]
        self._owners = [self._owners[i] for i in keep]
        self._opened = [opened[i] for i in keep]
        self._clean = True


@dataclass(slots=True)
class HolderIndex:
    """One holder's live cells (cellId -> leaf index, log order) and the index over the ones
    in the cache. ``cells`` is None until a holder-wide read lists them from the storage."""

    cells: dict[bytes, int] | None = None
    index: TermIndex = field(default_factory=TermIndex)
    texts: dict[bytes, str] = field(default_factory=dict)
    missing: set[bytes] = field(default_factory=set)
    #: The indexed cells as ranking items, and per session their leaf indexes and items in
    #: log order (the neighbours of retrieval.context): only verified cells in the cache.
    items: dict[bytes, Item] = field(default_factory=dict)
    sessions: dict[object, tuple[list[int], list[Item]]] = field(default_factory=dict)
    #: The indexed cells' vectors stacked for the semantic stage; None after any change.
    table: VectorTable | None = None
    #: The kept visible list: the indexed (unerased, verified) cells in log order, kept by
    #: add and remove, so a holder-wide read walks it instead of re-filtering the cache (and
    #: still checks each item against its caller: saihm/store/read/holderwide.py ``allowed_own``).
    visible: VisibleList = field(default_factory=VisibleList)

    def add(self, cell_id: bytes, entry: CacheEntry) -> int:
        """Index a cached cell; returns the bytes the index grew by (estimated)."""
        analysis = entry.analysis
        self.table = None
        new = self.index.add(cell_id, analysis.tf, analysis.length)
        self.texts[cell_id] = analysis.folded
        self.missing.discard(cell_id)
        grown = PER_INDEX_TERM * new
        old = self.items.get(cell_id)
        if old is not None:
            # The same cell cached again (a new verified entry): its place holds the new one.
            self.visible.replace(old.order, entry.own)
        else:
            item = context_item(cell_id, entry, shared=False)
            self.items[cell_id] = item
            orders, members = self.sessions.setdefault(item.group, ([], []))
            p = bisect_left(orders, item.order)
            orders.insert(p, item.order)
            members.insert(p, item)
            self.visible.insert(item.order, entry.own)
            grown += PER_ITEM
        return grown

    def remove(self, cell_id: bytes, analysis: Analysis) -> int:
        """Unindex a cell; returns the bytes the index shrank by (estimated)."""
        self.table = None
        self.texts.pop(cell_id, None)
        shrunk = PER_INDEX_TERM * self.index.remove(cell_id, analysis.tf)
        item = self.items.pop(cell_id, None)
        if item is not None:
            orders, members = self.sessions[item.group]
            p = bisect_left(orders, item.order)
            if p < len(members) and members[p].key == cell_id:  # leaf indexes are unique
                del orders[p], members[p]
            if not orders:
                del self.sessions[item.group]
            self.visible.remove(cell_id, item.order)
            shrunk += PER_ITEM
        return shrunk

    def neighbours(self, item: Item) -> list[Item]:
        """The indexed cells within the context window around ``item`` in its session."""
        if item.group is None or item.group not in self.sessions:
            return []
        orders, members = self.sessions[item.group]
        p = bisect_left(orders, item.order)
        return [*members[max(0, p - WINDOW) : p], *members[p + 1 : p + 1 + WINDOW]]

    def index_bytes(self) -> int:
        return PER_INDEX_TERM * len(self.index.postings) + PER_ITEM * len(self.items)


def context_item(cell_id: bytes, entry: CacheEntry, shared: bool) -> Item:
    """The ranking item of a cached cell (retrieval.context): its group is its holder's
    session and namespace, none for a shared cell (another holder's sessions are not the
    caller's to read around); a said or did record cell is a conversation turn."""
    own = entry.own
    payload, owner = own.payload, own.cell.holder_id
    group = None if shared else (owner, payload.session_id, payload.namespace)
    return Item(cell_id, entry.analysis, own.index, group, owner, payload.kind in TURN_KINDS)


def _estimate(opened: OpenedCell, analysis: Analysis, vector: Sequence[float] | None) -> int:
    content = opened.payload.content
    size = ENTRY_OVERHEAD + 2 * sys.getsizeof(content) + sys.getsizeof(analysis.folded)
    size += PER_TERM * len(analysis.tf) + sum(len(t) for t in analysis.tf)
    if opened.payload.metadata is not None:
        # The sealed JSON text, and the object a rendered recall element holds (about twice).
        size += 3 * sys.getsizeof(opened.payload.metadata)
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
        #: With an embedder: cached cells put without a vector (the warm-up worker's, to be
        #: filled off the request path; a recall that finds one embeds it itself), and the
        #: cells written to the log since the worker last looked (newest kept, bounded).
        self._unembedded: set[bytes] = set()
        self._written: deque[tuple[bytes, int]] = deque(maxlen=WRITTEN_MAX)
        #: The semantic stage's query vectors by query text, most recent last.
        self._queries: OrderedDict[str, Sequence[float]] = OrderedDict()

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

    @property
    def unembedded(self) -> AbstractSet[bytes]:
        """The cached cells put without a vector that nothing has embedded yet."""
        return self._unembedded

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
            self._unembedded.clear()
            self._written.clear()
            self._queries.clear()

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

    def follow(self, first: int, leaves: Sequence[LeafView], kek_version: int) -> bool:
        """Apply ``leaves``, which this process has just appended from index ``first``, as
        :meth:`sync` would, without reading them back from the storage. Only when the cache
        has applied every leaf before ``first`` under ``kek_version`` and no leaf needs a read
        (a contract's effect), and there is a leaf; False otherwise, and nothing changed: the
        caller syncs instead. Leaves other processes appended after them are replayed by the
        next :meth:`sync`.

        The caller holds :attr:`lock`.
        """
        if not leaves or self._kek != kek_version or self._synced != first:
            return False
        if any(_EFFECTS.get(leaf.operation) in _CONTRACT_EFFECTS for leaf in leaves):
            return False
        for offset, leaf in enumerate(leaves):
            self._apply(None, first + offset, leaf)
        self._synced = first + len(leaves)
        return True

    def _apply(self, txn: ReadTxn | None, index: int, leaf: LeafView) -> None:
        effect = _EFFECTS.get(leaf.operation)
        if effect is Effect.WRITES_CELL:
            if self.embedder is not None:
                self._written.append((leaf.subject_id, index))
            holder = self._holders.get(leaf.holder_id)
            if holder is not None and holder.cells is not None:
                holder.cells[leaf.subject_id] = index
                holder.missing.add(leaf.subject_id)
                self._candidate_bytes += PER_CANDIDATE
        elif effect is Effect.ERASES_CELL:
            if self._erased is not None:
                self._erased.add(leaf.subject_id)
            self._drop(leaf.subject_id, forget=True)
        elif effect in _CONTRACT_EFFECTS:
            if txn is None:  # pragma: no cover - follow() leaves these to sync()
                raise ValueError("a contract's leaf is applied from a transaction")
            # MAC-checked: a forged contract covers nothing, so it has nothing to drop.
            contract = self._projections.contracts.get(txn, leaf.subject_id)
            if contract is not None:
                for cell_id in contract.shards:
                    self._drop(cell_id)
        elif effect is Effect.ENDS_GRANT:
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
                    self._candidate_bytes += holder.add(cell_id, entry)
            self._candidate_bytes += PER_CANDIDATE * len(cells)
        return holder

    def take_written(self) -> list[tuple[bytes, int]]:
        """The (cellId, leaf index) of cells written since the last call, oldest first; for
        the embedding worker (saihm/store/read/warm.py). The caller holds :attr:`lock`."""
        out = list(self._written)
        self._written.clear()
        return out

    def fill(self, cell_id: bytes, entry: CacheEntry, vector: Sequence[float]) -> None:
        """Give a cached ``entry`` put without a vector its ``vector``, if it is still the
        entry cached for ``cell_id`` (else nothing). The caller holds :attr:`lock`."""
        self._unembedded.discard(cell_id)
        if self._entries.get(cell_id) is not entry or entry.vector is not None:
            return
        entry.vector = vector
        size = _estimate(entry.own, entry.analysis, vector)
        self._bytes += size - entry.size
        entry.size = size
        holder = self._holders.get(entry.own.cell.holder_id)
        if holder is not None and cell_id in holder.texts:
            holder.table = None

    def trim(self) -> None:
        """Evict down to the bound (after :meth:`fill` grew entries). Holds :attr:`lock`."""
        with self.lock:
            self._evict()

    def _put(
        self, opened: OpenedCell, vector: Sequence[float] | None = None, embed: bool = True
    ) -> CacheEntry:
        analysis = analyse(opened.payload.content)
        if vector is None and embed and self.embedder is not None:
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
        if vector is None and self.embedder is not None:
            self._unembedded.add(cell_id)
        else:
            self._unembedded.discard(cell_id)
        holder = self._holders.get(own.cell.holder_id)
        if holder is not None and holder.cells is not None and cell_id in holder.cells:
            self._candidate_bytes += holder.add(cell_id, entry)
        self._evict()
        return entry

    def _evict(self) -> None:
        while self._entries and self.used_bytes > self.max_bytes:
            cell_id, entry = self._entries.popitem(last=False)
            self._bytes -= entry.size
            self._unembedded.discard(cell_id)
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

    def put(
        self, opened: OpenedCell, vector: Sequence[float] | None = None, *, embed: bool = True
    ) -> CacheEntry:
        """Remember a cell the store just verified and decrypted (if this view is current),
        with its ``vector`` if :meth:`embed` made it already; else embedded now, unless
        ``embed`` is False (the worker, which embeds outside the lock and :meth:`fill` s)."""
        if not self.current:
            analysis = analyse(opened.payload.content)
            if vector is None and self.cache.embedder is not None:
                vector = self.cache.embedder.embed([opened.payload.content])[0]
            return CacheEntry(own=opened, analysis=analysis, size=0, vector=vector)
        return self.cache._put(opened, vector, embed)

    def embed_missing(self, keys: Container[bytes]) -> None:
        """Embed, in one model call, the cached cells among ``keys`` that were put without a
        vector and the worker has not filled yet: a recall never depends on the worker."""
        cache = self.cache
        if cache.embedder is None or not cache._unembedded:
            return
        todo: list[tuple[bytes, CacheEntry]] = []
        for cell_id in list(cache._unembedded):
            entry = cache._entries.get(cell_id)
            if entry is None or entry.vector is not None:
                cache._unembedded.discard(cell_id)
            elif cell_id in keys:
                todo.append((cell_id, entry))
        self.embed_entries(todo)

    def embed_entries(self, entries: Sequence[tuple[bytes, CacheEntry]]) -> None:
        """Give each of ``entries`` (cellId, entry: the cells one read ranks) that has no
        vector its vector, in batched model calls: filled in the cache where it is still the
        cached entry, else set on this read's own copy (evicted meanwhile, or the cache is
        off). A recall never depends on the worker."""
        cache = self.cache
        embedder = cache.embedder
        todo = [(k, e) for k, e in entries if e.vector is None]
        if embedder is None or not todo:
            return
        vectors = embedder.embed([e.own.payload.content for _k, e in todo])
        for (cell_id, entry), vector in zip(todo, vectors, strict=True):
            if cache._entries.get(cell_id) is entry:
                cache.fill(cell_id, entry, vector)
            else:
                cache._unembedded.discard(cell_id)
                entry.vector = vector

    def holder(self, holder_id: bytes) -> HolderIndex:
        """The holder's live cell list (built from the storage on first use) and index."""
        return self.cache._holder_cells(self.txn, holder_id)

    def query_vector(self, query: Query) -> Sequence[float] | None:
        """The query's vector (None without an embedder or for "all cells"): encoded once per
        text while the cache keeps it (:data:`QUERIES_MAX` most recent)."""
        cache = self.cache
        embedder = cache.embedder
        if embedder is None or query.everything:
            return None
        with cache.lock:
            vector = cache._queries.get(query.text)
            if vector is not None:
                cache._queries.move_to_end(query.text)
                return vector
        vector = embedder.embed([query.text])[0]
        if cache.enabled:
            with cache.lock:
                cache._queries[query.text] = vector
                while len(cache._queries) > QUERIES_MAX:
                    cache._queries.popitem(last=False)
        return vector

    def vector_table(self, holder: HolderIndex, shared: Container[bytes]) -> VectorTable:
        """The semantic stage's data for ranking ``holder`` with the ``shared`` cells: their
        missing vectors embedded (the holder's first, then the shared ones), and the holder's
        indexed cells' vectors stacked, once per change of its index, not per query."""
        self.embed_missing(holder.texts)
        self.embed_missing(shared)
        entries = self.cache._entries
        if holder.table is None:
            holder.table = VectorTable(
                [(k, v) for k in holder.texts if (v := entries[k].vector) is not None]
            )
        return holder.table
