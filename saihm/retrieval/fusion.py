"""Reciprocal rank fusion of several rankings of the same items.

Cormack, Clarke and Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
Rank Learning Methods", SIGIR 2009: ``RRFscore(d) = sum over rankings r of 1 / (k + r(d))``
with ranks from 1 and ``k = 60``, the constant the paper fixed.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

__all__ = ["RRF_K", "reciprocal_rank_fusion"]

RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[Hashable]], k: int = RRF_K
) -> dict[Hashable, float]:
    """The RRF score of every item that appears in any of ``rankings`` (best first each)."""
    scores: dict[Hashable, float] = {}
    for ranking in rankings:
        for position, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + position)
    return scores
