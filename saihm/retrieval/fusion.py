"""Fusing the lexical (BM25) and the semantic (cosine) evidence by a weighted sum.

Each score is first normalised to [0, 1] over the candidates of one query:

- lexical: ``bm25 / max bm25`` among the lexical matches (a cell that matches only by the
  containment baseline, or not lexically at all, has 0);
- semantic: ``(cosine - floor) / (1 - floor)``, 0 below the similarity ``floor``;

and the fused score is ``lexical_weight * lexical + semantic_weight * semantic``
(Fox and Shaw's CombSUM over min-max normalised scores, "Combination of multiple searches",
TREC-2, 1994; weighted as in Bruch, Gai and Ingber, "An Analysis of Fusion Functions for
Hybrid Retrieval", ACM TOIS 2023, which found a tuned convex combination better than
reciprocal rank fusion, and more robust to a weak ranker). The weights, the floor and the
number of dense candidates were chosen on half of the bench sets and checked on the other
half (docs/retrieval.md "Semantic stage").
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["DEFAULT_WEIGHTS", "Weights", "weighted_sum"]

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Weights:
    """The fusion's calibrated constants."""

    lexical: float
    semantic: float
    #: Cosine below which a cell gets no semantic credit and is not a dense candidate.
    floor: float
    #: The dense stage's candidates: at most this many cells, the nearest at or above the floor.
    dense_k: int


#: Chosen by ``saihm bench recall --embedding-model`` (saihm/bench/semantic.py) for
#: all-MiniLM-L6-v2 (int8 ONNX): the best mean MRR on the calibration half of the bench sets
#: that keeps every unanswerable question empty and no set's hit@10 below lexical.
DEFAULT_WEIGHTS = Weights(lexical=1.0, semantic=10.0, floor=0.32, dense_k=50)


def weighted_sum(
    lexical: Mapping[K, float], semantic: Mapping[K, float], weights: Weights = DEFAULT_WEIGHTS
) -> dict[K, float]:
    """The fused score of every key of ``lexical`` (BM25 of the lexical matches) or
    ``semantic`` (cosine to the query), by the module's formula."""
    top = max(lexical.values(), default=0.0)
    span = 1.0 - weights.floor
    fused: dict[K, float] = {}
    for key in {*lexical, *semantic}:
        lex = lexical.get(key, 0.0) / top if top > 0 else 0.0
        cos = semantic.get(key)
        sem = max(0.0, (cos - weights.floor) / span) if cos is not None and span > 0 else 0.0
        fused[key] = weights.lexical * lex + weights.semantic * sem
    return fused
