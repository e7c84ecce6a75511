"""Matching and ordering a set of documents for one query (docs/retrieval.md "Ranking").

The caller passes only documents the asker may see, so the collection statistics (N, mean
length, document frequencies) come from that set: a score never depends on a cell outside the
caller's scope.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from saihm.retrieval.analysis import Analysis, Query, contains
from saihm.retrieval.bm25 import PREFIX, Bm25, expandable
from saihm.retrieval.fusion import DEFAULT_WEIGHTS, Weights, weighted_sum

__all__ = ["Dense", "Doc", "Ranked", "collection_stats", "fuse", "query_idf", "rank"]

#: (key, analysis, order): ``order`` breaks ties (the cell's leaf index: older first).
Doc = tuple[Hashable, Analysis, int]
#: (key, cosine to the query, order) of every document the caller may see (the dense stage).
Dense = tuple[Hashable, float, int]


@dataclass(frozen=True, slots=True)
class Ranked:
    """One matching document and its relevance score (higher is more relevant)."""

    key: Hashable
    score: float
    order: int


def collection_stats(query: Query, docs: Iterable[Doc]) -> Bm25:
    """BM25 statistics of ``docs`` for the terms of ``query`` and their prefix expansions."""
    n = total = 0
    df: dict[str, int] = dict.fromkeys(query.terms, 0)
    prefixes = {t[:PREFIX]: t for t in query.terms if expandable(t)}
    expansions: dict[str, set[str]] = {}
    for _key, analysis, _order in docs:
        n += 1
        total += analysis.length
        for term in analysis.tf:
            if term in df:
                df[term] += 1
            elif prefixes and expandable(term) and term[:PREFIX] in prefixes:
                df[term] = 1
                for t in query.terms:
                    if t[:PREFIX] == term[:PREFIX]:
                        expansions.setdefault(t, set()).add(term)
    return Bm25(
        n=n,
        avgdl=total / n if n else 0.0,
        df=df,
        expansions={t: tuple(sorted(u)) for t, u in expansions.items()},
    )


def rank(
    query: Query,
    docs: Sequence[Doc],
    *,
    stats: Bm25 | None = None,
    dense: Sequence[Dense] | None = None,
    weights: Weights = DEFAULT_WEIGHTS,
    matched: bool = False,
) -> list[Ranked]:
    """The documents of ``docs`` that match ``query``, most relevant first.

    A document matches when it passes the containment baseline or shares a query term
    (:func:`saihm.retrieval.analysis.matches`); ``matched=True`` says the caller has already
    kept only those. Ties keep ``order``. The empty query matches everything, in ``order``,
    with score 0.

    With ``dense`` (cosines to the query from an :class:`~saihm.retrieval.embed.Embedder`, of
    documents the caller may see: at least every one that could be among the
    ``weights.dense_k`` nearest at or above ``weights.joins``, and every lexical match; others
    change nothing), the semantic stage adds those nearest documents (they need share no word
    with the query; ties by ``order``) and every candidate's score is the weighted sum of
    :mod:`saihm.retrieval.fusion`.
    """
    if query.everything:
        return sorted((Ranked(k, 0.0, o) for k, _a, o in docs), key=lambda r: r.order)
    if stats is None:
        stats = collection_stats(query, docs)
    terms = query.terms
    scored: list[Ranked] = []
    for key, analysis, order in docs:
        tf = analysis.tf
        shares = any(term in tf for term in terms)
        if not (matched or shares or contains(query, analysis)):
            continue
        score = stats.score(tf, analysis.length, terms) if shares else 0.0
        scored.append(Ranked(key, score, order))
    if dense is None:
        scored.sort(key=lambda r: (-r.score, r.order))
        return scored
    return fuse(scored, dense, weights)


def query_idf(query: Query, stats: Bm25) -> float:
    """The summed IDF of the query's terms under ``stats``: what a document holding each query
    term once, at the mean length, scores (the fusion's ``ideal`` for a stated fact)."""
    return sum(stats.idf(t) for t in query.terms)


def fuse(
    scored: Sequence[Ranked],
    dense: Sequence[Dense],
    weights: Weights = DEFAULT_WEIGHTS,
    around: Callable[[Hashable], Iterable[Hashable]] | None = None,
    ideal: float = 0.0,
) -> list[Ranked]:
    """The lexical ranking ``scored`` joined with the semantic stage: when the question is
    answerable (``scored`` is not empty, or a document of ``dense`` is at or above
    ``weights.admits``, the gate), the ``weights.dense_k`` documents of ``dense`` nearest the
    query at or above ``weights.joins`` (the floor) are added, and every
    candidate's score is the weighted sum of :mod:`saihm.retrieval.fusion` (``dense`` holds the
    cosine of each lexical match too, and with ``around``, of the documents around each
    candidate; one missing counts as no similarity). ``around(key)``: the documents whose
    highest cosine is a candidate's context: those around a dialogue turn, the document itself
    for a stated fact (which then counts as standing alone: :func:`weighted_sum` normalises its
    BM25 by ``max(best, ideal)``, ``ideal`` from :func:`query_idf`), none for no context."""
    # The gate: a question is about something remembered when a cell shares a word with it
    # or one cell is at least the gate near in meaning; only then does the dense stage add
    # the cells nearest it (at or above the floor), so a question about nothing gets [].
    answerable = bool(scored) or any(d[1] >= weights.admits for d in dense)
    joining = (d for d in dense if d[1] >= weights.joins) if answerable else ()
    near = heapq.nlargest(weights.dense_k, joining, key=lambda d: (d[1], -d[2]))
    lexical = {r.key: r.score for r in scored}
    orders = {r.key: r.order for r in scored}
    every = {key: cos for key, cos, _order in dense}
    cosines = {key: every[key] for key in lexical if key in every}
    for key, cos, order in near:
        cosines[key] = cos
        orders[key] = order
    context: dict[Hashable, float] = {}
    alone: set[Hashable] = set()
    if around is not None:
        for key in orders:
            keys = list(around(key))
            if keys == [key]:
                alone.add(key)
            best = max((every[k] for k in keys if k in every), default=None)
            if best is not None and weights.context:
                context[key] = best
    fused = weighted_sum(lexical, cosines, weights, context, alone=alone, ideal=ideal)
    out = [Ranked(k, s, orders[k]) for k, s in fused.items()]
    out.sort(key=lambda r: (-r.score, r.order))
    return out
