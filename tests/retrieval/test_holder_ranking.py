"""The holder-wide ranking (saihm/retrieval/holder.py, issue 36 "one ranking room"): the cache
caches, retrieval ranks. ``rank_holder`` ranks from plain inputs (a holder's term index, texts,
items and neighbours; the shared cells' items and vectors; the query vector and the holder's
stacked vectors) and knows nothing of the store, its cache or its lock."""

from __future__ import annotations

import ast
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import saihm.retrieval.holder as holder_module
from saihm.retrieval import analyse, analyse_query
from saihm.retrieval.bm25 import TermIndex
from saihm.retrieval.context import WINDOW, Item, in_order, rank_in_context
from saihm.retrieval.embed import VectorTable
from saihm.retrieval.holder import rank_holder, rank_visible


@dataclass
class Plain:
    """A holder's index as plain data (what the store's HolderIndex keeps)."""

    index: TermIndex = field(default_factory=TermIndex)
    texts: dict[bytes, str] = field(default_factory=dict)
    items: dict[bytes, Item] = field(default_factory=dict)

    def add(self, key: bytes, text: str, order: int) -> None:
        a = analyse(text)
        self.index.add(key, a.tf, a.length)
        self.texts[key] = a.folded
        self.items[key] = Item(key, a, order, "session", "me", True)

    def neighbours(self, item: Item) -> list[Item]:
        members = sorted(self.items.values(), key=lambda i: i.order)
        p = bisect_left([m.order for m in members], item.order)
        return [*members[max(0, p - WINDOW) : p], *members[p + 1 : p + 1 + WINDOW]]


TEXTS = [
    "we sailed the boat to the island",
    "How was the trip?",
    "It was lovely, the water was calm",
    "my kettle broke this morning",
    "the boatyard repaints hulls",
]


def plain() -> Plain:
    holder = Plain()
    for i, text in enumerate(TEXTS):
        holder.add(bytes([i]) * 32, text, i)
    return holder


def test_the_ranking_module_imports_nothing_of_the_store() -> None:
    tree = ast.parse(Path(holder_module.__file__).read_text(encoding="utf-8"))
    names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + [
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    ]
    assert all(name.startswith("saihm.retrieval") for name in names if name.startswith("saihm"))
    assert "threading" not in names and "lmdb" not in names


def test_lexical_ranking_is_the_context_ranking_of_the_whole_index() -> None:
    """Without shared cells the statistics are the index's: the answer is the context
    ranking's over every indexed cell (the item-by-item path's, for the same cells)."""
    holder = plain()
    q = analyse_query("boat")
    got = rank_holder(holder, q, [], None, None)
    docs = list(holder.items.values())
    want = rank_in_context(q, docs, in_order(docs))
    assert [(r.key, round(r.score, 9)) for r in got] == [(r.key, round(r.score, 9)) for r in want]
    # "boatyard" shares no term with "boat" but contains it: the containment baseline.
    assert bytes([4]) * 32 in {r.key for r in got}
    assert bytes([3]) * 32 not in {r.key for r in got}


def test_shared_cells_join_the_statistics_and_the_answer() -> None:
    holder = plain()
    q = analyse_query("kettle")
    alone = rank_holder(holder, q, [], None, None)
    theirs = Item(b"s" * 32, analyse("a kettle and a kettle lid"), 99, None, "them", False)
    both = rank_holder(holder, q, [(theirs, None)], None, None)
    assert {r.key for r in both} == {r.key for r in alone} | {theirs.key}
    mine = bytes([3]) * 32
    # One more document holding the term: its IDF, so the holder's own cell's score, drops.
    assert next(r.score for r in both if r.key == mine) < next(
        r.score for r in alone if r.key == mine
    )


def test_need_keeps_only_the_best_without_the_semantic_stage() -> None:
    holder = plain()
    q = analyse_query("boat island water trip")
    full = rank_holder(holder, q, [], None, None)
    assert len(full) > 1
    assert [r.key for r in rank_holder(holder, q, [], None, 1)] == [full[0].key]


def test_the_semantic_stage_ranks_from_the_given_vectors() -> None:
    """With a query vector the dense stage brings the nearest cell though it shares no term,
    from the table the caller passed; without the table it refuses rather than guess."""
    holder = plain()
    vectors = {k: [1.0, 0.0] if k == bytes([3]) * 32 else [0.0, 1.0] for k in holder.texts}
    table = VectorTable(list(vectors.items()))
    orders = {k: i.order for k, i in holder.items.items()}
    q = analyse_query("appliance")
    assert rank_holder(holder, q, [], None, None) == []
    got = rank_holder(holder, q, [], [1.0, 0.0], None, table=table, order=orders.__getitem__)
    assert got and got[0].key == bytes([3]) * 32
    with pytest.raises(ValueError):
        rank_holder(holder, q, [], [1.0, 0.0], None)


def test_the_item_by_item_ranking_agrees_with_the_holder_wide_one() -> None:
    """The two read paths rank in one room: over the same visible cells, the same answer."""
    holder = plain()
    docs = list(holder.items.values())
    for text in ("boat", "trip water", "kettle morning", "nothing here"):
        q = analyse_query(text)
        wide = rank_holder(holder, q, [], None, None)
        each = rank_visible(q, docs, None, [])
        assert [(r.key, r.score) for r in each] == [(r.key, r.score) for r in wide]


def test_the_item_by_item_semantic_stage_uses_the_given_vectors() -> None:
    holder = plain()
    docs = list(holder.items.values())
    kettle = bytes([3]) * 32
    have = [(i.key, [1.0, 0.0] if i.key == kettle else [0.0, 1.0], i.order) for i in docs]
    q = analyse_query("appliance")
    assert rank_visible(q, docs, None, have) == []
    assert rank_visible(q, docs, [1.0, 0.0], have)[0].key == kettle
