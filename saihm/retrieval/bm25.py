"""Okapi BM25 over an index that grows and shrinks one cell at a time.

The scoring function is BM25 as given by Robertson and Zaragoza, "The Probabilistic Relevance
Framework: BM25 and Beyond", Foundations and Trends in Information Retrieval 3(4), 2009,
eq. (3.23) with the saturation parameters of §3.4 (here ``K1 = 1.2``, ``B = 0.75``)::

    score(d, q) = sum over t in q of  IDF(t) * tf(t, d) * (k1 + 1)
                                      / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

with the non-negative IDF ``ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))`` (the Robertson /
Sparck Jones weight of §3.3 shifted by one so that a term in more than half the cells still
counts a little, as Lucene does). Each distinct query term counts once.

No library was used for the index: ``rank_bm25`` and ``bm25s`` build a static corpus and must
be rebuilt to add or drop one document, while a memory store adds and erases cells one at a
time (docs/retrieval.md). ``rank_bm25`` is the peer the bench compares against.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

__all__ = ["K1", "B", "Bm25", "TermIndex"]

K1 = 1.2
B = 0.75


@dataclass(frozen=True, slots=True)
class Bm25:
    """Collection statistics for one scoring pass: ``n`` documents of mean length ``avgdl``
    and the document frequency of each query term among them."""

    n: int
    avgdl: float
    df: dict[str, int]

    def idf(self, term: str) -> float:
        """ln(1 + (N - df + 0.5) / (df + 0.5)) (Robertson & Zaragoza 2009 §3.3, shifted)."""
        df = self.df.get(term, 0)
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def score(self, tf: dict[str, int], length: int, terms: Iterable[str]) -> float:
        """BM25 of one document with term frequencies ``tf`` and ``length`` terms."""
        avgdl = self.avgdl or 1.0
        norm = K1 * (1.0 - B + B * length / avgdl)
        total = 0.0
        for term in terms:
            f = tf.get(term)
            if f:
                total += self.idf(term) * f * (K1 + 1.0) / (f + norm)
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

    def __len__(self) -> int:
        return len(self.lengths)

    def __contains__(self, key: object) -> bool:
        return key in self.lengths

    def add(self, key: Hashable, tf: dict[str, int], length: int) -> None:
        """Index document ``key`` (replacing an earlier entry under the same key)."""
        if key in self.lengths:
            self.remove(key, tf)
        for term, f in tf.items():
            self.postings.setdefault(term, {})[key] = f
        self.lengths[key] = length
        self.total_length += length

    def remove(self, key: Hashable, tf: dict[str, int]) -> None:
        """Drop document ``key``, whose term frequencies were ``tf``; absent keys are ignored."""
        length = self.lengths.pop(key, None)
        if length is None:
            return
        self.total_length -= length
        for term in tf:
            posting = self.postings.get(term)
            if posting is None:
                continue
            posting.pop(key, None)
            if not posting:
                del self.postings[term]

    def candidates(self, terms: Iterable[str]) -> set[Hashable]:
        """Documents holding at least one of ``terms``."""
        out: set[Hashable] = set()
        for term in terms:
            posting = self.postings.get(term)
            if posting:
                out.update(posting)
        return out

    def stats(self, terms: Iterable[str]) -> Bm25:
        """BM25 statistics over every document in the index."""
        n = len(self.lengths)
        df = {t: len(self.postings.get(t, ())) for t in terms}
        return Bm25(n=n, avgdl=self.total_length / n if n else 0.0, df=df)
