"""Embedding off the request path (saihm/store/read/warm.py; docs/retrieval.md "The cache"):
a committed cell is embedded by the worker, not by the next recall; the warm-up embeds the
live cells within the cache's budget; close stops the worker; a stop or a kill mid-warm-up
loses nothing; a recall never depends on the worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from saihm.operator import Operator
from saihm.store import Store
from tests.store.test_semantic_stage import ConceptEmbedder
from tests.support.world import World, make_world

#: A bounded wait on an explicit event (the worker's ``drained``), never a sleep.
WAIT = 60.0
TEXTS = ["the user drinks tea", "the user wants dark mode", "lunch at noon"]


class Counting(ConceptEmbedder):
    """Counts the texts embedded per thread name (the worker's is "saihm-embed")."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        self.calls.append((threading.current_thread().name, len(texts)))
        return super().embed(texts)

    def texts_on_request_path(self) -> int:
        return sum(n for name, n in self.calls if name != "saihm-embed")


def embed_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "saihm-embed" and t.is_alive()]


def drain(world: World) -> None:
    warmer = world.store.warmer
    assert warmer is not None
    assert warmer.drained.wait(WAIT), "the embedding worker did not drain"


def vectors(world: World) -> dict[str, bool]:
    """Cached plaintext -> whether it has a vector (read under the cache's lock)."""
    cache = world.store.reader.cache
    with cache.lock:
        return {e.own.payload.content: e.vector is not None for e in cache.entries.values()}


def test_a_remembered_cell_is_embedded_without_any_recall(tmp_path: Path) -> None:
    embedder = Counting()
    world = make_world(tmp_path, embedder=embedder)
    try:
        a = world.holder()
        for text in TEXTS:
            world.call(a, "saihm_remember", content=text)
        drain(world)
        assert vectors(world) == dict.fromkeys(TEXTS, True)
        assert embedder.texts_on_request_path() == 0
        # The recall then embeds only its query, and still answers by meaning.
        got = world.call(a, "saihm_recall", query="colour")
        assert [i["plaintext"] for i in got] == ["the user wants dark mode"]
        assert embedder.texts_on_request_path() == 1
    finally:
        world.store.close()
    assert embed_threads() == []


def test_close_stops_the_worker(tmp_path: Path) -> None:
    world = make_world(tmp_path, embedder=ConceptEmbedder())
    a = world.holder()
    world.call(a, "saihm_remember", content="the user drinks tea")
    warmer = world.store.warmer
    assert warmer is not None and warmer.alive
    world.store.close()
    assert not warmer.alive
    assert embed_threads() == []


def test_the_warm_up_embeds_live_cells_newest_first_within_the_budget(tmp_path: Path) -> None:
    world = make_world(tmp_path, embedder=ConceptEmbedder())
    a = world.holder()
    texts = [f"note {i} the user drinks tea" for i in range(60)]
    for text in texts:
        world.call(a, "saihm_remember", content=text)
    forgotten = world.call(a, "saihm_remember", content="a forgotten colour")
    world.call(a, "saihm_forget", id=forgotten["cellId"])  # type: ignore[index]
    world.reopen()
    try:
        assert vectors(world) == {}
        cache = world.store.reader.cache
        cache.max_bytes = 60_000  # room for some of the cells, not all
        world.store.start_jobs()  # saihm serve's start: the warm-up begins
        drain(world)
        got = vectors(world)
        assert got and all(got.values())
        assert set(got) < set(texts)  # an erased cell is never opened
        assert cache.used_bytes <= cache.max_bytes
        # Newest first: the ones cached are the latest written.
        newest = sorted(got, key=lambda t: int(t.split()[1]))
        assert newest == texts[len(texts) - len(got) :]
    finally:
        world.store.close()
    assert embed_threads() == []


class Gated(ConceptEmbedder):
    """The worker's calls block on ``gate`` once ``entered`` is set."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        if threading.current_thread().name == "saihm-embed":
            self.entered.set()
            assert self.gate.wait(WAIT)
        return super().embed(texts)


def remember_all(world: World, count: int) -> tuple[str, list[str]]:
    a = world.holder()
    texts = [f"fact {i} the user wants dark mode" for i in range(count)]
    for text in texts:
        world.call(a, "saihm_remember", content=text)
    return a.token, texts


def test_close_mid_warm_up_stops_the_worker_and_loses_nothing(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    token, texts = remember_all(world, 80)
    world.store.close()
    embedder = Gated()
    store = Store(world.config, clock=world.clock, embedder=embedder)
    world.operator = Operator(store, world.config)
    store.start_jobs()
    assert embedder.entered.wait(WAIT)  # the worker is inside its first step
    closer = threading.Thread(target=store.close)
    closer.start()
    embedder.gate.set()
    closer.join(WAIT)
    assert not closer.is_alive() and embed_threads() == []
    world.embedder = None
    world.reopen()
    try:
        got = world.call(token, "saihm_recall")
        assert sorted(i["plaintext"] for i in got) == sorted(texts)
    finally:
        world.store.close()


CHILD = """
import json, sys, threading, os, signal
from saihm.config import Config
from saihm.store import Store
from tests.store.test_semantic_stage import ConceptEmbedder

class Stuck(ConceptEmbedder):
    def embed(self, texts):
        if threading.current_thread().name == "saihm-embed":
            print("warming", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().embed(texts)

job = json.loads(sys.argv[1])
store = Store(Config.for_data(job["data"]), clock=lambda: job["now"], embedder=Stuck())
store.start_jobs()
threading.Event().wait(120)
"""


def test_a_kill_mid_warm_up_loses_nothing(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    token, texts = remember_all(world, 40)
    world.store.close()
    job = {"data": str(world.config.data_dir), "now": world.clock.now}
    root = str(Path(__file__).resolve().parents[2])  # the child imports tests.store
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.environ.get("PYTHONPATH", ""), root])}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(job)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == -9 and done.stdout == "warming\n", done.stderr
    world.reopen()
    try:
        got = world.call(token, "saihm_recall")
        assert sorted(i["plaintext"] for i in got) == sorted(texts)
    finally:
        world.store.close()


class FailsOnTheWorker(ConceptEmbedder):
    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        if threading.current_thread().name == "saihm-embed":
            raise RuntimeError("no model on the worker")
        return super().embed(texts)


@pytest.mark.parametrize("token_kind", ["session", "holder-wide"])
def test_a_recall_embeds_what_the_worker_left_without_a_vector(
    tmp_path: Path, token_kind: str
) -> None:
    world = make_world(tmp_path, embedder=FailsOnTheWorker())
    a = world.holder()
    token = a.token if token_kind == "session" else world.grant_token(a.holder_id)
    for text in TEXTS:
        world.call(a, "saihm_remember", content=text)
    try:
        drain(world)
        # The worker put the cells in the cache, then failed to embed them.
        assert vectors(world) == dict.fromkeys(TEXTS, False)
        got = world.call(token, "saihm_recall", query="colour")
        assert [i["plaintext"] for i in got] == ["the user wants dark mode"]
        assert vectors(world) == dict.fromkeys(TEXTS, True)
    finally:
        world.store.close()
