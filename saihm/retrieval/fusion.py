"""Fusing the lexical (BM25) and the semantic (cosine) evidence by a weighted sum.

Each score is first normalised to [0, 1] over the candidates of one query:

- lexical: ``bm25 / max bm25`` among the lexical matches (a cell that matches only by the
  containment baseline, or not lexically at all, has 0);
- semantic: ``(cosine - floor) / (1 - floor)``, 0 below the similarity ``floor``;
- context: for a dialogue turn (a cell that reads as a turn or has one in its window), the
  same of the highest cosine among the cells around it (its window, as for the lexical
  context): a reply ("Super good, so creamy!") carries its subject in the turns around it for
  the model as for BM25. A stated fact (no turn in or around it) stands alone: its context is
  its own cosine, and its lexical part is its share of the query, ``bm25 / max(max bm25,
  ideal)`` with ``ideal`` the query's summed IDF, so a fact that shares one incidental word
  of a question ("like" in "tastes like soap" for "Where does she like to sit when flying?")
  does not outrank one near it in meaning;

and the fused score is ``lexical_weight * lexical + semantic_weight * semantic +
context_weight * context`` (Fox and Shaw's CombSUM over min-max normalised scores,
"Combination of multiple searches", TREC-2, 1994; weighted as in Bruch, Gai and Ingber, "An
Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023, which found a tuned convex
combination better than reciprocal rank fusion, and more robust to a weak ranker). The ``gate``
decides whether the question is about anything remembered: it is when a cell shares a word
with it or one cell is at least the gate near in meaning, and then the cells nearest it at or
above the ``floor`` join the candidates; a question about something never remembered (no
match, nothing that near) is answered by ``[]``. The constants were chosen on
development data only: LoCoMo's development half and the calibration halves of the bench sets
(docs/retrieval.md "Semantic stage").
"""

from __future__ import annotations

from collections.abc import Container, Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["DEFAULT_WEIGHTS", "Weights", "weighted_sum"]

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Weights:
    """The fusion's calibrated constants."""

    lexical: float
    semantic: float
    #: Cosine below which a cell gets no semantic credit.
    floor: float
    #: The dense stage's candidates: at most this many cells, the nearest at or above the floor.
    dense_k: int
    #: Cosine at or above which one cell makes a question that shares no word with any cell
    #: answerable (None: the floor); below it for every cell the dense stage adds nothing.
    gate: float | None = None
    #: The weight of a dialogue turn's context (the highest cosine around it).
    context: float = 0.0

    @property
    def admits(self) -> float:
        """The cosine at or above which one cell makes a question answerable (the gate)."""
        return self.floor if self.gate is None else self.gate

    @property
    def joins(self) -> float:
        """The cosine at or above which a cell joins an answerable question's candidates."""
        return min(self.floor, self.admits)


#: Chosen by ``saihm bench recall --embedding-model`` (saihm/bench/semantic.py) for
#: all-MiniLM-L6-v2 (int8 ONNX) on development data only: hit@10 on LoCoMo's development half
#: (semantic and context weights, floor), keeping every unanswerable question of the bench
#: sets' calibration halves empty (the gate) and no set's hit@10 below lexical.
DEFAULT_WEIGHTS = Weights(lexical=1.0, semantic=1.0, floor=0.2, dense_k=50, gate=0.32, context=0.6)


def _credit(cos: float | None, weights: Weights) -> float:
    span = 1.0 - weights.floor
    return max(0.0, (cos - weights.floor) / span) if cos is not None and span > 0 else 0.0


def weighted_sum(
    lexical: Mapping[K, float],
    semantic: Mapping[K, float],
    weights: Weights = DEFAULT_WEIGHTS,
    context: Mapping[K, float] | None = None,
    *,
    alone: Container[K] = (),
    ideal: float = 0.0,
) -> dict[K, float]:
    """The fused score of every key of ``lexical`` (BM25 of the lexical matches) or
    ``semantic`` (cosine to the query), by the module's formula; ``context``: the highest
    cosine around each dialogue turn among them (a stated fact's own). The keys of ``alone``
    (stated facts) have their BM25 normalised by ``max(best, ideal)``, ``ideal`` being the
    query's summed IDF: what a fact covering every query term once would score."""
    top = max(lexical.values(), default=0.0)
    fact_top = max(top, ideal)
    fused: dict[K, float] = {}
    for key in {*lexical, *semantic}:
        norm = fact_top if key in alone else top
        lex = lexical.get(key, 0.0) / norm if norm > 0 else 0.0
        score = weights.lexical * lex + weights.semantic * _credit(semantic.get(key), weights)
        if context and weights.context:
            score += weights.context * _credit(context.get(key), weights)
        fused[key] = score
    return fused
