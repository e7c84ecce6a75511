"""docs/retrieval.md "Context": a cell is scored with its neighbours in its session, names in the
query weigh more, a newer note that corrects an older one ranks above it (a later mention does
not), and a neighbour the caller may not see (erased, out of scope) contributes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saihm.events import SealedPayload
from saihm.retrieval import analyse, analyse_query
from saihm.retrieval.context import (
    DEFAULT,
    Item,
    Weights,
    corrects,
    in_order,
    query_names,
    rank_in_context,
    reads_as_turn,
)
from saihm.retrieval.rank import rank
from saihm.store.read.cache import CacheEntry, HolderIndex
from saihm.store.read.views import CellHeader, OpenedCell
from tests.support.world import World, make_world


def items(texts: list[str], turn: bool = True) -> list[Item]:
    return [Item(i, analyse(t), i, "s", "h", turn) for i, t in enumerate(texts)]


def ranked(query: str, docs: list[Item], weights: Weights = DEFAULT) -> dict[object, float]:
    return {
        r.key: r.score
        for r in rank_in_context(analyse_query(query), docs, in_order(docs), weights=weights)
    }


def test_a_reply_is_found_through_the_turn_before_it() -> None:
    turns = ["the party for my son", "Arjun turned nine!", "nice weather", "buy milk"]
    got = ranked("How old is her son?", items(turns))
    # The match first, then the turns within two places of it, through their context only.
    assert next(iter(got)) == 0 and set(got) == {0, 1, 2}
    assert got[0] > got[1] > 0
    # A memory cell (a fact, not a turn) is returned only when it matches by itself.
    assert list(ranked("How old is her son?", items(turns, turn=False))) == [0]


def test_without_context_weights_the_score_is_plain_bm25() -> None:
    texts = ["apple river", "river stone", "cloud apple apple"]
    plain = {
        r.key: r.score
        for r in rank(analyse_query("apple"), [(i.key, i.analysis, i.order) for i in items(texts)])
    }
    off = Weights(neighbours=0, session=0, names=0, corrections=False)
    assert ranked("apple", items(texts), off) == pytest.approx(plain)


def test_names_in_the_query_weigh_more() -> None:
    assert query_names("What does Rohan like? Tell me about Ananya's cat.") == ("rohan", "ananya")
    assert query_names("Where is the Tea?") == ("tea",)
    assert query_names("How old is her son?") == ()
    docs = items(["Rohan likes jazz", "the neighbours like jazz too", "filler text here"], False)
    base = Weights(neighbours=0, session=0, names=0, corrections=False)
    named = Weights(neighbours=0, session=0, names=0.5, corrections=False)
    plain = ranked("Does Rohan like jazz?", docs, base)
    boosted = ranked("Does Rohan like jazz?", docs, named)
    assert boosted[0] > plain[0] and boosted[1] == pytest.approx(plain[1])


def test_a_newer_correction_ranks_above_the_older_fact() -> None:
    texts = [
        "Priya is vegetarian.",
        "Priya lives in Leeds.",
        "Priya is no longer vegetarian: she is pescatarian now and eats fish.",
        "Priya moved to York last spring.",
    ]
    docs = items(texts, turn=False)
    assert list(ranked("Is Priya vegetarian?", docs))[:2] == [2, 0]
    off = Weights(corrections=False)
    assert list(ranked("Is Priya vegetarian?", docs, off))[:2] == [0, 2]  # what it corrects
    # The same attribute (where she lives: "moved" changes it) with a different value.
    assert next(iter(ranked("Where does Priya live?", docs, off))) == 1
    where = list(ranked("Where does Priya live?", docs))
    assert where.index(3) + 1 == where.index(1)  # just below the newer one


def test_the_rule_is_same_subject_same_attribute_new_value_said_as_a_change() -> None:
    older = analyse("Priya is vegetarian.")
    assert corrects(analyse("Priya now eats fish again, she is not vegetarian"), older)
    # Only a change: a later note that merely mentions the fact does not correct it.
    assert not corrects(analyse("Rohan cooked for Priya, who is vegetarian, on Friday."), older)
    # Another attribute of the same subject, even said as a change.
    assert not corrects(analyse("Priya now lives in York."), older)
    # The same words and nothing new: a repetition, not a new value.
    assert not corrects(analyse("Priya is now vegetarian."), older)


def test_a_later_mention_does_not_sink_the_fact() -> None:
    # The old rule ("two terms in common") placed the fact below every note that mentioned it.
    texts = [
        "Priya joined the pottery class at the community centre.",
        "Rohan asked Priya about the pottery class and the community centre.",
    ]
    assert next(iter(ranked("Which class did Priya join?", items(texts, turn=False)))) == 0


@pytest.mark.parametrize("turn", [True, False])
def test_dialogue_turns_never_lose_their_evidence_to_a_later_turn(turn: bool) -> None:
    # A said record (turn=True) or a plain note that reads as a turn (first or second person).
    texts = [
        "Caroline: I went to the LGBTQ support group yesterday.",
        "Melanie: How was the LGBTQ support group yesterday, Caroline? Is it new now?",
    ]
    docs = items(texts, turn=turn)
    assert all(reads_as_turn(d) for d in docs)
    assert not reads_as_turn(items(["Priya is vegetarian."], turn=False)[0])
    got = list(ranked("When did Caroline go to the LGBTQ support group?", docs))
    assert got[0] == 0


def test_corrections_compare_cells_of_one_owner_only() -> None:
    a = Item(0, analyse("Priya is vegetarian."), 0, ("a", "s"), "a")
    b = Item(1, analyse("Priya is no longer vegetarian, pescatarian now"), 1, ("b", "s"), "b")
    got = rank_in_context(analyse_query("Is Priya vegetarian?"), [a, b], in_order([a, b]))
    assert [r.key for r in got] == [0, 1]


# -- through the store: only what the caller may see is context ----------------------------


def scores(world: World, token: str, query: str) -> dict[str, float]:
    got = world.call(token, "saihm_recall", query=query)
    return {item["plaintext"]: item["score"] for item in got}


@pytest.mark.parametrize("cache_mb", [64, 0])
def test_a_forgotten_neighbour_contributes_nothing(tmp_path: Path, cache_mb: int) -> None:
    world = make_world(tmp_path, recall_cache_mb=cache_mb)
    try:
        a, b, c = world.holder(), world.holder(), world.holder()
        ids = {}
        for text in ("party for my son on Saturday", "Arjun turned nine", "shopping list"):
            ids[text] = world.call(a, "saihm_record", content=text, kind="said")["cellId"]
        # b: the same statistics as a (three cells, one of the same length) without "son".
        for text in ("party for my dog on Sunday", "Arjun turned nine", "shopping list"):
            world.call(b, "saihm_record", content=text, kind="said")
        # c: a without the neighbour.
        for text in ("Arjun turned nine", "shopping list"):
            world.call(c, "saihm_record", content=text, kind="said")
        for token in (a.token, world.grant_token(a.holder_id)):
            # The neighbour that says "son" raises the reply's score.
            with_context = scores(world, token, "son Arjun")
            assert (
                with_context["Arjun turned nine"]
                > scores(world, b.token, "son Arjun")["Arjun turned nine"]
            )
        world.call(a, "saihm_forget", id=ids["party for my son on Saturday"])
        for token in (a.token, world.grant_token(a.holder_id)):
            # Exactly the score of the same cell where the neighbour was never written.
            assert scores(world, token, "son Arjun") == scores(world, c.token, "son Arjun")
            assert scores(world, token, "son") == {}
    finally:
        world.store.close()


@pytest.mark.parametrize("cache_mb", [64, 0])
def test_a_neighbour_out_of_the_tokens_scope_contributes_nothing(
    tmp_path: Path, cache_mb: int
) -> None:
    world = make_world(tmp_path, recall_cache_mb=cache_mb)
    try:
        a, b = world.holder(), world.holder()
        _, other = world.session(a.holder_id)
        # Written in another session of the same holder, just before the reply in log order.
        world.call(other, "saihm_record", content="party for my son on Saturday", kind="said")
        for text in ("Arjun turned nine", "shopping list"):
            world.call(a, "saihm_record", content=text, kind="said")
            world.call(b, "saihm_record", content=text, kind="said")
        assert scores(world, a.token, "son") == {}
        got = scores(world, a.token, "son Arjun")
        assert got == scores(world, b.token, "son Arjun")
    finally:
        world.store.close()


def _entry(i: int, session: int, text: str) -> CacheEntry:
    header = CellHeader(bytes([i]) * 32, b"h" * 32, 1, "STANDARD", b"n" * 12, b"s" * 16, 0)
    payload = SealedPayload(
        content=text, session_id=bytes([session]) * 32, namespace="memory", kind="memory"
    )
    own = OpenedCell(cell=header, payload=payload, shared=False, index=i)
    return CacheEntry(own=own, analysis=analyse(text), size=0)


@given(
    cells=st.lists(st.integers(0, 2), min_size=1, max_size=12),
    dropped=st.sets(st.integers(0, 11)),
)
def test_the_session_order_after_removals_equals_one_built_without_them(
    cells: list[int], dropped: set[int]
) -> None:
    """The holder index's per-session order (the neighbours) follows adds and removes."""
    entries = [_entry(i + 1, s, f"note {i}") for i, s in enumerate(cells)]
    shrunk, fresh = HolderIndex(), HolderIndex()
    for e in entries:
        shrunk.add(e.own.cell.cell_id, e)
    for i in sorted(dropped):
        if i < len(entries):
            shrunk.remove(entries[i].own.cell.cell_id, entries[i].analysis)
    for i, e in enumerate(entries):
        if i not in dropped:
            fresh.add(e.own.cell.cell_id, e)
    assert shrunk.sessions == fresh.sessions
    for item in fresh.items.values():
        assert shrunk.neighbours(item) == fresh.neighbours(item)


@pytest.mark.parametrize("turn", [True, False])
def test_the_turn_after_a_question_is_its_answer(turn: bool) -> None:
    # A question is answered by the turn after it: that turn takes the question's words
    # (docs/retrieval.md "Context"), above the other turns around the question. A note that
    # reads as a turn (turn=False: first person, or a question) is a turn here too.
    texts = [
        "We went to the beach on Sunday.",
        "Did you try the coconut milk ice cream?",
        "Super good, rich and creamy, my new favourite!",
        "We should go again soon.",
    ]
    got = list(ranked("What did Nate think of the coconut milk ice cream?", items(texts, turn)))
    assert set(got[:2]) == {1, 2} and set(got) == {0, 1, 2, 3}
    # A statement of fact is not a turn: it is returned only when it matches by itself.
    facts = ["Priya lives in Leeds.", "Is the ice cream vegan?", "Priya owns a red bicycle."]
    assert list(ranked("Is the ice cream vegan?", items(facts, turn=False))) == [1]


def test_a_note_among_turns_is_read_as_one_and_a_fact_stands_alone() -> None:
    """The fusion's context (docs/retrieval.md "Semantic stage"): a note with no first or
    second person ("They were awestruck.") inside a conversation is a reply; a stated fact
    among facts is its own context."""
    from saihm.retrieval.context import semantic_context

    talk = items(
        ["Did the kids like the memorial?", "They were awestruck.", "Lovely to hear."], turn=False
    )
    assert not reads_as_turn(talk[1])
    near = in_order(talk)
    assert semantic_context(talk[1], near) == [talk[0].key, talk[2].key]
    facts = items(["Priya is vegetarian.", "Ravi is a dentist."], turn=False)
    assert semantic_context(facts[0], in_order(facts)) == [facts[0].key]
