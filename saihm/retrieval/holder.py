"""Ranking the cells one read may see (docs/retrieval.md "The cache"): the store's one
ranking room.

The holder-wide read (saihm/store/read/holderwide.py) ranks the caller's holder's indexed cells
and the cells shared with it from the data the store's cache keeps (:func:`rank_holder`): the
holder's term index, its case-folded texts and ranking items, the neighbours of an item in its
session, and, for the semantic stage, the vectors stacked per holder. The item-by-item read
(saihm/store/read/reader.py) ranks the cells it has just checked (:func:`rank_visible`). The
cache caches (and embeds what is missing); this module ranks. Pure: no storage, no cache, no
lock; the caller passes only what the asker may see.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Protocol, cast

from saihm.retrieval.analysis import Query
from saihm.retrieval.bm25 import Bm25, TermIndex
from saihm.retrieval.context import (
    Item,
    corrected,
    in_order,
    rank_in_context,
    semantic_context,
)
from saihm.retrieval.embed import VectorTable, cosines
from saihm.retrieval.fusion import DEFAULT_WEIGHTS
from saihm.retrieval.rank import Ranked, collection_stats, fuse, query_idf

__all__ = ["IndexedHolder", "SharedCell", "rank_holder", "rank_visible"]

#: A cell shared with the caller by another holder: its ranking item (no group: another
#: holder's sessions are not the caller's to read around) and its vector, if it has one.
SharedCell = tuple[Item, "Sequence[float] | None"]


class IndexedHolder(Protocol):
    """One holder's indexed cells as the ranking reads them (the store's ``HolderIndex``)."""

    @property
    def index(self) -> TermIndex:
        """The term index over the indexed cells (keyed by cellId)."""
        ...

    @property
    def texts(self) -> Mapping[bytes, str]:
        """The indexed cells' case-folded texts (the containment baseline's scan)."""
        ...

    @property
    def items(self) -> Mapping[bytes, Item]:
        """The indexed cells' ranking items."""
        ...

    def neighbours(self, item: Item) -> list[Item]:
        """The indexed cells within the context window around ``item`` in its session."""
        ...


def rank_holder(
    holder: IndexedHolder,
    query: Query,
    shared: Sequence[SharedCell],
    qvec: Sequence[float] | None,
    need: int | None,
    *,
    table: VectorTable | None = None,
    order: Callable[[bytes], int] | None = None,
) -> list[Ranked]:
    """Rank the holder's indexed cells and ``shared`` for ``query``, best first.

    Precondition: the index holds every live cell of the holder (the caller opened the
    missing ones), which a holder-wide caller may all see; the statistics are those of
    exactly the ranked set: the index plus ``shared``. With ``need`` (and no semantic
    stage) only the best ``need`` are kept, by a heap.

    With a query vector ``qvec`` (the semantic stage), ``table`` holds the indexed cells'
    vectors (every one embedded: the caller embeds what is missing first), ``shared`` their
    vectors, and ``order`` gives an indexed cell's leaf index.
    """
    index = holder.index
    terms = query.terms
    base = index.stats(terms)
    stats = base
    if shared:
        # The shared cells join the statistics (and may bring expansion terms).
        extra = collection_stats(query, [(s.key, s.analysis, 0) for s, _v in shared])
        wanted = {*base.df, *extra.df}
        df = {t: len(index.postings.get(t, ())) + extra.df.get(t, 0) for t in wanted}
        expansions = {
            t: tuple(sorted({*base.expansions.get(t, ()), *extra.expansions.get(t, ())}))
            for t in {*base.expansions, *extra.expansions}
        }
        n = base.n + len(shared)
        total = index.total_length + sum(s.analysis.length for s, _v in shared)
        stats = Bm25(n=n, avgdl=total / n if n else 0.0, df=df, expansions=expansions)
    # A holder's index is keyed by cell id only (HolderIndex.add is its one writer, with bytes).
    matched = cast(set[bytes], index.candidates(terms))
    first, rest = query.containment[0], query.containment[1:]
    # The containment baseline over the cells that share no term: a C-level substring
    # scan over the case-folded texts, then the remaining terms on the few that pass.
    for cell_id, text in holder.texts.items():
        if first in text and cell_id not in matched and all(t in text for t in rest):
            matched.add(cell_id)
    items = holder.items
    # Shared cells (another holder's) are ranked without neighbours: their sessions are
    # not the caller's to read around.
    docs = [items[k] for k in matched]
    theirs: dict[Hashable, Item] = {s.key: s for s, _v in shared}
    docs.extend(theirs.values())
    lexical = rank_in_context(
        query, docs, holder.neighbours, stats=stats, need=None if qvec is not None else need
    )
    if qvec is None:
        return lexical
    # The semantic stage: the cosine of every cell the caller may see, indexed or shared.
    # The indexed cells' vectors are stacked once per change of the index, not per query.
    if table is None or order is None:
        raise ValueError("the semantic stage needs the holder's vector table and leaf indexes")
    w = DEFAULT_WEIGHTS
    lookup = ChainMap[Hashable, Item](theirs, cast("dict[Hashable, Item]", items))

    def around(key: Hashable) -> list[Hashable]:
        """The cells whose cosine is the cell's context for the semantic stage."""
        item = lookup.get(key)
        return [] if item is None else semantic_context(item, holder.neighbours)

    ranked = [r.key for r in lexical]
    also = [*ranked, *(n for k in ranked for n in around(k))]
    near = table.nearest(qvec, w.joins, w.dense_k, also)
    # The cosines around the cells only the dense stage brought (one more matrix product).
    missing = {n for k in list(near) for n in around(k)} - near.keys()
    if missing:
        near.update(table.nearest(qvec, 2.0, 0, missing))
    # The table's keys are the holder's cell ids (bytes).
    dense = [(k, c, order(cast(bytes, k))) for k, c in near.items()]
    have = [(s.key, v, s.order) for s, v in shared if v is not None]
    sims = cosines(qvec, [v for _k, v, _i in have])
    dense.extend((k, c, i) for (k, _v, i), c in zip(have, sims, strict=True))
    # A newer cell that corrects an older one still ranks above it after fusion.
    out = corrected(fuse(lexical, dense, w, around, query_idf(query, stats)), lookup)
    out.sort(key=lambda r: (-r.score, r.order))
    return out


def rank_visible(
    q: Query,
    items: Sequence[Item],
    qvec: Sequence[float] | None,
    have: Sequence[tuple[Hashable, Sequence[float], int]],
) -> list[Ranked]:
    """Rank ``items`` (every cell one read may see, each checked on this call) for ``q``, best
    first, with their neighbours drawn from themselves; with a query vector ``qvec``, fused with
    the cosines of ``have`` (key, vector, leaf index: the visible cells that have a vector)."""
    neighbours = in_order(items)
    ranked = rank_in_context(q, items, neighbours)
    if qvec is not None:
        # The semantic stage: every visible cell's cosine (a cell without a vector has none).
        near = cosines(qvec, [v for _k, v, _i in have])
        dense = [(k, c, i) for (k, _v, i), c in zip(have, near, strict=True)]
        by_key = {i.key: i for i in items}

        def around(key: Hashable) -> list[Hashable]:
            item = by_key.get(key)
            return [] if item is None else semantic_context(item, neighbours)

        # The statistics of the visible set, as rank_in_context computed them.
        stats = collection_stats(q, [(i.key, i.analysis, i.order) for i in items])
        ideal = query_idf(q, stats)
        # A newer cell that corrects an older one still ranks above it after fusion.
        ranked = corrected(fuse(ranked, dense, DEFAULT_WEIGHTS, around, ideal), by_key)
        ranked.sort(key=lambda r: (-r.score, r.order))
    return ranked
