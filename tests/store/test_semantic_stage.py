"""The semantic stage (docs/retrieval.md "Semantic stage"): the plumbing on a small
deterministic embedder; the real model in tests/retrieval/test_semantic_model.py."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from saihm.operator import Operator
from saihm.retrieval import Embedder, SemanticUnavailable, load_embedder
from saihm.retrieval.embed import INSTALL_HINT
from saihm.store import Store
from tests.support.world import make_world

CONCEPTS = {"theme": 0, "dark": 0, "mode": 0, "colour": 0, "tea": 1, "drink": 1, "noon": 2}


class ConceptEmbedder:
    """Bag of concepts: words map to a few axes, so "theme" is near "dark mode"."""

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        out = []
        for text in texts:
            v = [0.0, 0.0, 0.0, 0.01]
            for word in text.casefold().replace("?", " ").split():
                if word in CONCEPTS:
                    v[CONCEPTS[word]] += 1.0
            norm = sum(x * x for x in v) ** 0.5
            out.append(tuple(x / norm for x in v))
        return out


@pytest.mark.parametrize("cache_mb", [64, 0])
def test_semantic_stage_ranks_and_adds_what_shares_no_word(tmp_path: Path, cache_mb: int) -> None:
    assert isinstance(ConceptEmbedder(), Embedder)
    world = make_world(tmp_path, ConceptEmbedder(), recall_cache_mb=cache_mb)
    try:
        a = world.holder()
        for text in ("the user drinks tea", "the user wants dark mode", "lunch at noon"):
            world.call(a, "saihm_remember", content=text)
        for token in (a.token, world.grant_token(a.holder_id)):
            got = world.call(token, "saihm_recall", query="which theme does the user want?")
            assert [i["plaintext"] for i in got] == [
                "the user wants dark mode",
                "the user drinks tea",
            ]
            # Shares no word with any cell: found by meaning alone (issue 23, item 2).
            got = world.call(token, "saihm_recall", query="colour")
            assert [i["plaintext"] for i in got] == ["the user wants dark mode"]
            # Near nothing and sharing nothing: still [].
            assert world.call(token, "saihm_recall", query="volcano") == []
    finally:
        world.store.close()


#: Fixed cosines to the query "How old is her son?" (on the first axis), as the real model
#: gives them (docs/retrieval.md "Semantic stage"): the evidence is under the gate.
NEAR = {
    "How old is her son?": 1.0,
    "Her mother lives in Pune.": 0.49,
    "Arjun turned nine in March.": 0.27,
    "She dislikes horror films.": 0.1,
    "What is the GDP of Brazil?": 0.0,
}


class FixedEmbedder:
    """Unit vectors at fixed cosines to the first axis; the unanswerable question lies on
    another axis, at 0.3 (under the gate) to every cell."""

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        out = []
        for text in texts:
            c = NEAR[text]
            if text.startswith("What is the GDP"):
                out.append((0.0, 0.0, 1.0))
            else:
                out.append((c, (1 - c * c) ** 0.5 * 0.95, 0.3 * (1 - c * c) ** 0.5))
        return [tuple(x / sum(y * y for y in v) ** 0.5 for x in v) for v in out]


@pytest.mark.parametrize("cache_mb", [64, 0])
def test_an_answerable_question_admits_cells_under_the_gate(tmp_path: Path, cache_mb: int) -> None:
    """Issue 33: the gate decides whether a question is about anything remembered (one cell
    at the gate); if so, the cells over the floor join, the evidence under the gate among
    them, on both read paths; a question near nothing still gets []."""
    world = make_world(tmp_path, FixedEmbedder(), recall_cache_mb=cache_mb)
    try:
        a = world.holder()
        for text in ("Her mother lives in Pune.", "Arjun turned nine in March."):
            world.call(a, "saihm_remember", content=text)
        world.call(a, "saihm_remember", content="She dislikes horror films.")
        for token in (a.token, world.grant_token(a.holder_id)):
            got = world.call(token, "saihm_recall", query="How old is her son?")
            assert [i["plaintext"] for i in got] == [
                "Her mother lives in Pune.",
                "Arjun turned nine in March.",  # 0.27: under the gate, over the floor
            ]
            assert world.call(token, "saihm_recall", query="What is the GDP of Brazil?") == []
    finally:
        world.store.close()


def test_without_the_extra_the_loader_says_how_to_install(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "model.onnx").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(SemanticUnavailable) as err:
        load_embedder(tmp_path)
    assert str(err.value) == INSTALL_HINT
    assert "saihm[semantic]" in INSTALL_HINT
    with pytest.raises(SemanticUnavailable):
        load_embedder(tmp_path / "missing")


def test_a_repeated_query_is_encoded_once_and_forgotten_with_the_cache(tmp_path: Path) -> None:
    class Counting(ConceptEmbedder):
        def __init__(self) -> None:
            self.asked: list[str] = []

        def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
            self.asked.extend(texts)
            return super().embed(texts)

    embedder = Counting()
    world = make_world(tmp_path, recall_cache_mb=64)
    world.store.close()
    store = Store(world.config, clock=world.clock, embedder=embedder)
    world.operator = Operator(store, world.config)
    try:
        a = world.holder()
        world.call(a, "saihm_remember", content="the user wants dark mode")
        question = "which theme does the user want?"
        first = world.call(a, "saihm_recall", query=question)
        second = world.call(a, "saihm_recall", query=question)
        assert [i["plaintext"] for i in first] == [i["plaintext"] for i in second]
        assert first and first[0]["plaintext"] == "the user wants dark mode"
        assert embedder.asked.count(question) == 1
        # The vector goes with the cache (memory only): asked again afterwards, encoded again.
        store.reader.cache.clear()
        world.call(a, "saihm_recall", query=question)
        assert embedder.asked.count(question) == 2
    finally:
        world.store.close()
