"""A fresh process's first recall with the semantic stage (docs/retrieval.md "The cache"): a
holder-wide read embeds its holder's cells outside the cache's lock first, so the other reads
of the process go on meanwhile and a forget meanwhile is honoured; the item-by-item read
embeds the cells it opens in batched model calls, and only when its query needs them."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from saihm.store.read.reader import AHEAD_MIN
from tests.store.test_semantic_stage import ConceptEmbedder
from tests.support.world import Holder, World, make_world

#: A bounded wait on an explicit event, never a sleep.
WAIT = 30.0
GARDEN = [f"garden note {i} about dark mode" for i in range(AHEAD_MIN + 8)]


class Gated(ConceptEmbedder):
    """Holds any call that embeds more than one garden note until released (bounded), and
    counts the texts of every call."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        self.calls.append(len(texts))
        if len(texts) > 1 and any(t.startswith("garden note") for t in texts):
            self.entered.set()
            self.release.wait(WAIT)
        return super().embed(texts)


def fresh_process(tmp_path: Path, embedder: ConceptEmbedder) -> tuple[World, Holder, Holder]:
    """A holder with the garden notes and one with a single cell, written without a model,
    then the store reopened with ``embedder``: nothing is cached, no vector exists."""
    world = make_world(tmp_path)
    a, b = world.holder(), world.holder()
    for text in GARDEN:
        world.call(a, "saihm_remember", content=text)
    world.call(b, "saihm_remember", content="the user drinks tea")
    world.embedder = embedder
    world.reopen()
    return world, a, b


def in_thread(world: World, token: str, query: str) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        out["got"] = world.call(token, "saihm_recall", query=query)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_a_cold_holder_wide_recall_does_not_hold_up_other_reads(tmp_path: Path) -> None:
    gated = Gated()
    world, a, b = fresh_process(tmp_path, gated)
    try:
        other = world.grant_token(b.holder_id)
        # b's one cell is embedded within its read (fewer than AHEAD_MIN), never held.
        assert [i["plaintext"] for i in world.call(other, "saihm_recall", query="tea")] == [
            "the user drinks tea"
        ]
        cold, got = in_thread(world, world.grant_token(a.holder_id), "colour")
        assert gated.entered.wait(WAIT), "the cold recall never embedded a batch"
        # While the cold recall's batch is in the model, b's recall takes the cache's lock.
        warm, other_got = in_thread(world, other, "tea")
        warm.join(WAIT)
        finished_while_held = not warm.is_alive() and not gated.release.is_set()
        gated.release.set()
        cold.join(WAIT)
        warm.join(WAIT)
        assert finished_while_held, "b's recall waited for a's model call"
        assert [i["plaintext"] for i in other_got["got"]] == ["the user drinks tea"]
        assert sorted(i["plaintext"] for i in got["got"]) == sorted(GARDEN)
    finally:
        gated.release.set()
        world.store.close()


def test_a_forget_while_the_batch_is_in_the_model_is_honoured(tmp_path: Path) -> None:
    gated = Gated()
    world, a, _b = fresh_process(tmp_path, gated)
    try:
        ids = {i["plaintext"]: i["cellId"] for i in world.call(a, "saihm_recall", query="")}
        gone = GARDEN[3]
        cold, got = in_thread(world, world.grant_token(a.holder_id), "colour")
        assert gated.entered.wait(WAIT), "the cold recall never embedded a batch"
        world.call(a, "saihm_forget", id=ids[gone])
        gated.release.set()
        cold.join(WAIT)
        assert not cold.is_alive()
        assert sorted(i["plaintext"] for i in got["got"]) == sorted(set(GARDEN) - {gone})
    finally:
        gated.release.set()
        world.store.close()


def test_the_item_by_item_read_embeds_in_batches_and_only_for_a_query(tmp_path: Path) -> None:
    counting = Gated()
    counting.release.set()  # never held here
    world, a, _b = fresh_process(tmp_path, counting)
    try:
        # A session token reads item by item. "All cells" needs no vector: no model call.
        everything = world.call(a, "saihm_recall", query="")
        assert len(everything) == len(GARDEN)  # type: ignore[arg-type]
        assert counting.calls == []
        got = world.call(a, "saihm_recall", query="colour")
        assert sorted(i["plaintext"] for i in got) == sorted(GARDEN)  # type: ignore[union-attr]
        # One call for the query and the cells in batches: not one call per cell.
        assert sum(counting.calls) == len(GARDEN) + 1
        assert len(counting.calls) <= 3
    finally:
        world.store.close()
