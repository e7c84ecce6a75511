"""The semantic stage's calibration and quality, computed with the store's ranking code
(context-aware lexical ranking, :func:`~saihm.retrieval.rank.fuse`, corrections) on each set's
cells taken as one holder's remembered cells in one session.

``saihm bench recall --embedding-model DIR`` runs :func:`calibration_figures`: on every shipped
set (``saihm/bench/data/*.json`` of the conversational shape: turns and questions with the
indexes of their evidence turns, and optionally ``unanswerable`` questions whose right answer is
``[]``), the questions of even position are the calibration half and those of odd position the
held-out half. The fusion's constants (:data:`saihm.retrieval.DEFAULT_WEIGHTS`) were chosen on
the calibration half as the grid point of best mean MRR over the sets among those that lower no
set's hit@10 below the lexical ranking and answer every unanswerable question with ``[]``; the
figures report both halves, so a reader sees what the choice is worth on unseen questions.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterator, Sequence
from itertools import product
from pathlib import Path
from typing import Any

from saihm.bench.figures import figure
from saihm.retrieval import DEFAULT_WEIGHTS, Embedder, Weights, analyse, analyse_query
from saihm.retrieval.context import (
    Item,
    corrected,
    in_order,
    rank_in_context,
    semantic_context,
)
from saihm.retrieval.embed import cosines
from saihm.retrieval.rank import collection_stats, fuse, query_idf

__all__ = ["SETS", "Case", "calibration_figures", "cases", "grid", "metrics", "ranks"]

DATA = Path(__file__).parent / "data"
#: The sets the stage is calibrated and measured on.
SETS = ("convmem", "paraphrase")
FLOORS = (0.15, 0.2, 0.25, 0.32)
SEMANTIC = (0.6, 1.0, 1.5, 10.0)
CONTEXT = (0.0, 0.6, 1.0)

#: One question over one holder's memory: (docs, vectors, question, evidence, query vector);
#: an unanswerable question has no evidence.
Case = tuple[list[Any], list[Any], str, set[int], Any]


def cases(name: str, embedder: Embedder) -> list[Case]:
    """Every question of set ``name``, with its conversation's analysed and embedded turns."""
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    out: list[Case] = []
    for conversation in data["conversations"]:
        turns = conversation["turns"]
        docs = [(i, analyse(t), i) for i, t in enumerate(turns)]
        vectors = list(embedder.embed(turns))
        questions = [q["question"] for q in conversation["questions"]]
        qvecs = list(embedder.embed(questions))
        for q, qvec in zip(conversation["questions"], qvecs, strict=True):
            out.append((docs, vectors, q["question"], set(q["evidence"]), qvec))
        unanswerable = conversation.get("unanswerable", [])
        for question, qvec in zip(unanswerable, embedder.embed(unanswerable), strict=True):
            out.append((docs, vectors, question, set(), qvec))
    return out


def _answered(items: Sequence[Case], weights: Weights | None) -> float:
    """The fraction of the unanswerable cases of ``items`` that got anything but ``[]``."""
    asked = answered = 0
    for docs, vectors, question, evidence, qvec in items:
        if evidence:
            continue
        asked += 1
        answered += bool(_ranking(docs, vectors, question, qvec, weights))
    return answered / asked if asked else 0.0


def _ranking(
    docs: list[Any], vectors: list[Any], question: str, qvec: Any, weights: Weights | None
) -> list[Any]:
    """The store's ranking (saihm/retrieval/holder.py ``rank_holder``): the context-aware lexical
    ranking of the conversation's cells as one holder's remembered cells in one session,
    then, with ``weights``, fused with the cosines and corrected."""
    items = [Item(key, analysis, order, 0, 0, False) for key, analysis, order in docs]
    query = analyse_query(question)
    neighbours = in_order(items)
    lexical = rank_in_context(query, items, neighbours)
    if weights is None:
        return lexical
    dense = [(i, c, i) for i, c in enumerate(cosines(qvec, vectors))]
    by_key = {i.key: i for i in items}

    def around(key: Hashable) -> list[Hashable]:
        return semantic_context(by_key[key], neighbours)

    ideal = query_idf(query, collection_stats(query, [(i.key, i.analysis, i.order) for i in items]))
    out = corrected(fuse(lexical, dense, weights, around, ideal), by_key)
    out.sort(key=lambda r: (-r.score, r.order))
    return out


def ranks(items: Sequence[Case], weights: Weights | None) -> list[int | None]:
    """The rank (from 0) of each case's first evidence turn, None when not returned; with
    ``weights`` None, the lexical ranking alone."""
    out: list[int | None] = []
    for docs, vectors, question, evidence, qvec in items:
        if not evidence:
            continue
        ranked = _ranking(docs, vectors, question, qvec, weights)
        out.append(next((i for i, r in enumerate(ranked) if r.key in evidence), None))
    return out


def metrics(found: Sequence[int | None]) -> dict[str, float]:
    """hit@1, hit@3, hit@10 and MRR of evidence ranks."""
    n = len(found) or 1
    out = {f"hit{k}": sum(1 for r in found if r is not None and r < k) / n for k in (1, 3, 10)}
    out["mrr"] = sum(1 / (r + 1) for r in found if r is not None) / n
    return out


def grid(halves: dict[str, list[Case]]) -> list[tuple[float, Weights]]:
    """(mean MRR over the sets, weights) of every grid point that lowers no set's hit@10
    below the lexical ranking and answers no unanswerable question, best first."""
    lexical = {name: metrics(ranks(items, None)) for name, items in halves.items()}
    scored = []
    d = DEFAULT_WEIGHTS
    for floor, semantic, context in product(FLOORS, SEMANTIC, CONTEXT):
        weights = Weights(1.0, semantic, floor, d.dense_k, gate=d.gate, context=context)
        per = {name: metrics(ranks(items, weights)) for name, items in halves.items()}
        if any(per[name]["hit10"] < lexical[name]["hit10"] for name in halves):
            continue
        if any(_answered(items, weights) > 0 for items in halves.values()):
            continue
        scored.append((sum(m["mrr"] for m in per.values()) / len(per), weights))
    scored.sort(key=lambda s: -s[0])
    return scored


def calibration_figures(embedder: Embedder) -> Iterator[dict[str, Any]]:
    """The grid's best point on the calibration half, and every set's metrics on both halves
    with the lexical ranking and with :data:`DEFAULT_WEIGHTS`."""
    every = {name: cases(name, embedder) for name in SETS}
    calibration = {name: items[0::2] for name, items in every.items()}
    held_out = {name: items[1::2] for name, items in every.items()}
    best = grid(calibration)
    if best:
        mrr, weights = best[0]
        yield figure(
            "recall",
            "semantic_calibration_best_mrr",
            round(mrr, 4),
            "mean MRR, calibration half",
            "the same grid search's mean MRR at DEFAULT_WEIGHTS",
            round(dict((w, m) for m, w in best).get(DEFAULT_WEIGHTS, 0.0), 4),
            True,
            best_weights=[weights.semantic, weights.floor, weights.context],
        )
    for half, sets in (("calibration", calibration), ("held_out", held_out)):
        for name, items in sets.items():
            lexical = metrics(ranks(items, None))
            semantic = metrics(ranks(items, DEFAULT_WEIGHTS))
            if any(not evidence for *_r, evidence, _q in items):
                lexical["answered_unanswerable"] = _answered(items, None)
                semantic["answered_unanswerable"] = _answered(items, DEFAULT_WEIGHTS)
            for metric, value in semantic.items():
                yield figure(
                    "recall",
                    f"semantic_{name}_{half}_{metric}",
                    round(value, 4),
                    "fraction",
                    "the lexical ranking alone, same questions",
                    round(lexical[metric], 4),
                    metric != "answered_unanswerable",
                    questions=len(items),
                )
