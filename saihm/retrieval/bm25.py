"""Okapi BM25 over an index that grows and shrinks one cell at a time.

The scoring function is BM25 as given by Robertson and Zaragoza, "The Probabilistic Relevance
Framework: BM25 and Beyond", Foundations and Trends in Information Retrieval 3(4), 2009,
eq. (3.23) with the saturation parameters of §3.4 (here ``K1 = 1.2``, ``B = 0.75``)::

    score(d, q) = sum over t in q of  IDF(t) * tf(t, d) * (k1 + 1)
                                      / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

with the non-negative IDF ``ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))`` (the Robertson /
Sparck Jones weight of §3.3 shifted by one so that a term in more than half the cells still
counts a little, as Lucene does). Each distinct query term counts once.

Prefix expansion, for word forms the stemmer leaves apart ("allergies" / "allergic"): a query
term of at least :data:`PREFIX` letters that a cell lacks counts at :data:`EXPANSION_WEIGHT` of
the best BM25 term weight among the cell's terms that share its first :data:`PREFIX` letters
(query expansion by truncation). It only orders cells that match; it never makes one match.

No library was used for the index: ``rank_bm25`` and ``bm25s`` build a static corpus and must
be rebuilt to add or drop one document, while a memory store adds and erases cells one at a
time (docs/retrieval.md). ``rank_bm25`` is the peer the bench compares against.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["EXPANSION_WEIGHT", "K1", "PREFIX", "B", "Bm25", "TermIndex", "expandable"]

K1 = 1.2
B = 0.75
PREFIX = 5
EXPANSION_WEIGHT = 0.5


def expandable(term: str) -> bool:
    """Whether ``term`` takes part in prefix expansion (at least :data:`PREFIX` letters)."""
    return len(term) >= PREFIX


@dataclass(frozen=True, slots=True)
class Bm25:
    """Collection statistics for one scoring pass: ``n`` documents of mean length ``avgdl``,
    the document frequency of each query term and expansion term among them, and the
    expansions of each query term (``expansions[t]``: the other terms with its prefix)."""

    n: int
    avgdl: float
    df: dict[str, int]
    expansions: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def idf(self, term: str) -> float:
        """ln(1 + (N - df + 0.5) / (df + 0.5)) (Robertson & Zaragoza 2009 §3.3, shifted)."""
        df = self.df.get(term, 0)
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def score(
        self,
        tf: Mapping[str, int],
        length: float,
        terms: Iterable[str],
        weights: Mapping[str, float] | None = None,
    ) -> float:
        """BM25 of one document with term frequencies ``tf`` and ``length`` terms; a query
        term listed in ``weights`` counts that many times (a name in the query, 1.x)."""
        avgdl = self.avgdl or 1.0
        norm = K1 * (1.0 - B + B * length / avgdl)
        total = 0.0
        for term in terms:
            w = 1.0 if weights is None else weights.get(term, 1.0)
            f = tf.get(term)
            if f:
                total += w * self.idf(term) * f * (K1 + 1.0) / (f + norm)
                continue
            best = 0.0
            for other in self.expansions.get(term, ()):
                f = tf.get(other)
                if f:
                    best = max(best, self.idf(other) * f * (K1 + 1.0) / (f + norm))
            total += w * EXPANSION_WEIGHT * best
        return total


class TermIndex:
    """Postings (term -> {document: tf}) and lengths of a changing set of documents.

    ``add`` and ``remove`` cost O(terms of the document); :meth:`stats` gives the BM25
    statistics of the whole index in O(query terms).
    """

    def __init__(self) -> None:
        self.postings: dict[str, dict[Hashable, int]] = {}
        self.lengths: dict[Hashable, int] = {}
        self.total_length = 0
        self.prefixes: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self.lengths)

    def __contains__(self, key: object) -> bool:
        return key in self.lengths

    def add(self, key: Hashable, tf: dict[str, int], length: int) -> int:
        """Index document ``key`` (replacing an earlier entry under the same key); returns how
        many terms are new to the index."""
        if key in self.lengths:
            self.remove(key, tf)
        new = 0
        for term, f in tf.items():
            posting = self.postings.get(term)
            if posting is None:
                new += 1
                posting = self.postings[term] = {}
                if expandable(term):
                    self.prefixes.setdefault(term[:PREFIX], set()).add(term)
            posting[key] = f
        self.lengths[key] = length
        self.total_length += length
        return new

    def remove(self, key: Hashable, tf: dict[str, int]) -> int:
        """Drop document ``key``, whose term frequencies were ``tf``; absent keys are ignored.
        Returns how many terms left the index with it."""
        length = self.lengths.pop(key, None)
        if length is None:
            return 0
        gone = 0
        self.total_length -= length
        for term in tf:
            posting = self.postings.get(term)
            if posting is None:
                continue
            posting.pop(key, None)
            if not posting:
                gone += 1
                del self.postings[term]
                if expandable(term):
                    group = self.prefixes[term[:PREFIX]]
                    group.discard(term)
                    if not group:
                        del self.prefixes[term[:PREFIX]]
        return gone

    def candidates(self, terms: Iterable[str]) -> set[Hashable]:
        """Documents holding at least one of ``terms``."""
        out: set[Hashable] = set()
        for term in terms:
            posting = self.postings.get(term)
            if posting:
                out.update(posting)
        return out

    def expansions(self, terms: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """For each expandable term, the other indexed terms that share its prefix."""
        out = {}
        for term in terms:
            if expandable(term):
                group = self.prefixes.get(term[:PREFIX], ())
                others = tuple(sorted(u for u in group if u != term))
                if others:
                    out[term] = others
        return out

    def stats(self, terms: Iterable[str]) -> Bm25:
        """BM25 statistics over every document in the index."""
        terms = tuple(terms)
        n = len(self.lengths)
        expansions = self.expansions(terms)
        wanted = set(terms).union(*expansions.values())
        df = {t: len(self.postings.get(t, ())) for t in wanted}
        avgdl = self.total_length / n if n else 0.0
        return Bm25(n=n, avgdl=avgdl, df=df, expansions=expansions)
