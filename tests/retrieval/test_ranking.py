"""docs/retrieval.md "Ranking": Okapi BM25 (Robertson & Zaragoza 2009) over an index that
grows and shrinks per cell, and the weighted-sum fusion of the semantic stage."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from saihm.retrieval import K1, B, TermIndex, Weights, analyse, analyse_query, weighted_sum
from saihm.retrieval.embed import VectorTable, cosines
from saihm.retrieval.rank import collection_stats, fuse, query_idf, rank

texts = st.lists(
    st.lists(st.sampled_from(["apple", "river", "stone", "cloud", "lamp", "the"]), max_size=8).map(
        " ".join
    ),
    min_size=1,
    max_size=12,
)


def reference_bm25(query: list[str], doc: list[str], corpus: list[list[str]]) -> float:
    """Robertson & Zaragoza 2009 eq. (3.23), written out plainly."""
    n = len(corpus)
    avgdl = sum(len(d) for d in corpus) / n
    total = 0.0
    for term in set(query):
        df = sum(1 for d in corpus if term in d)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        tf = doc.count(term)
        total += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(doc) / (avgdl or 1)))
    return total


@given(corpus=texts, query=st.sampled_from(["apple", "river stone", "cloud lamp apple", "zzz"]))
def test_scores_are_bm25_of_the_visible_set(corpus: list[str], query: str) -> None:
    q = analyse_query(query)
    docs = [(i, analyse(t), i) for i, t in enumerate(corpus)]
    analysed = [[t for t, f in a.tf.items() for _ in range(f)] for _k, a, _o in docs]
    for r in rank(q, docs):
        expected = reference_bm25(list(q.terms), analysed[r.key], analysed)
        assert math.isclose(r.score, expected, rel_tol=1e-9, abs_tol=1e-12)


@given(corpus=texts, drop=st.sets(st.integers(0, 11)))
def test_an_index_that_shrinks_equals_one_built_without_the_dropped(
    corpus: list[str], drop: set[int]
) -> None:
    grown, fresh = TermIndex(), TermIndex()
    for i, text in enumerate(corpus):
        a = analyse(text)
        grown.add(i, a.tf, a.length)
    for i in drop:
        if i < len(corpus):
            grown.remove(i, analyse(corpus[i]).tf)
    for i, text in enumerate(corpus):
        if i not in drop:
            a = analyse(text)
            fresh.add(i, a.tf, a.length)
    assert grown.postings == fresh.postings
    assert grown.lengths == fresh.lengths
    assert grown.total_length == fresh.total_length
    q = analyse_query("apple river")
    assert grown.stats(q.terms) == fresh.stats(q.terms)
    kept = [(i, analyse(t), i) for i, t in enumerate(corpus) if i not in drop]
    assert collection_stats(q, kept) == fresh.stats(q.terms)


def test_more_relevant_cells_come_first_and_ties_keep_log_order() -> None:
    docs = [
        (0, analyse("a note about rivers"), 0),
        (1, analyse("river river river: the river trip"), 1),
        (2, analyse("unrelated words entirely"), 2),
        (3, analyse("a note about rivers"), 3),
    ]
    ranked = rank(analyse_query("river"), docs)
    assert [r.key for r in ranked] == [1, 0, 3]
    assert ranked[0].score > ranked[1].score == ranked[2].score > 0


def test_containment_only_matches_rank_after_term_matches() -> None:
    docs = [(0, analyse("riverside"), 0), (1, analyse("river"), 1)]
    ranked = rank(analyse_query("river"), docs)
    assert [(r.key, r.score > 0) for r in ranked] == [(1, True), (0, False)]


def test_weighted_sum_normalises_bm25_by_its_best_and_cosine_above_the_floor() -> None:
    w = Weights(lexical=1.0, semantic=2.0, floor=0.2, dense_k=10)
    fused = weighted_sum({"a": 4.0, "b": 2.0, "c": 0.0}, {"a": 0.2, "b": 0.6, "d": 1.0}, w)
    assert fused.keys() == {"a", "b", "c", "d"}
    assert math.isclose(fused["a"], 1.0 + 0.0)  # at the floor: no semantic credit
    assert math.isclose(fused["b"], 0.5 + 2.0 * (0.6 - 0.2) / 0.8)
    assert fused["c"] == 0.0  # a containment-only match, not near: kept, last
    assert math.isclose(fused["d"], 2.0)  # dense only: no lexical credit
    assert weighted_sum({}, {}, w) == {}


DOCS = [
    (0, analyse("user likes tea"), 0),
    (1, analyse("user prefers dark mode"), 1),
    (2, analyse("the colour scheme is black"), 2),
    (3, analyse("lunch at noon"), 3),
]
W = Weights(lexical=1.0, semantic=1.0, floor=0.5, dense_k=10)


def test_the_dense_stage_adds_a_near_cell_that_shares_no_word() -> None:
    """Issue 23: the semantic stage can add what shares no word; a cell below the similarity
    floor stays out."""
    q = analyse_query("what theme does the user like")
    dense = [(0, 0.1, 0), (1, 0.9, 1), (2, 0.8, 2), (3, 0.49, 3)]
    assert [r.key for r in rank(q, DOCS)] == [0, 1]
    ranked = rank(q, DOCS, dense=dense, weights=W)
    assert [r.key for r in ranked] == [1, 0, 2]
    assert 3 not in {r.key for r in ranked}


def test_the_dense_stage_keeps_only_its_k_nearest() -> None:
    q = analyse_query("nothing in common")
    dense = [(0, 0.6, 0), (1, 0.9, 1), (2, 0.8, 2), (3, 0.7, 3)]
    ranked = rank(q, DOCS, dense=dense, weights=Weights(1.0, 1.0, 0.5, dense_k=2))
    assert [r.key for r in ranked] == [1, 2]


def test_a_query_near_nothing_and_sharing_nothing_returns_nothing() -> None:
    q = analyse_query("volcano")
    assert rank(q, DOCS, dense=[(k, 0.49, o) for k, _a, o in DOCS], weights=W) == []


def test_prefix_expansion_orders_word_forms_the_stemmer_leaves_apart() -> None:
    """ "allergies" stems to "allergi", "allergic" to "allerg": the shared five-letter prefix
    gives the second cell partial credit, so it comes first; it adds no match of its own."""
    docs = [
        (0, analyse("the user went to the shop"), 0),
        (1, analyse("the user is allergic to peanuts"), 1),
        (2, analyse("allergic reactions are common"), 2),
    ]
    ranked = rank(analyse_query("what allergies does the user have"), docs)
    assert [r.key for r in ranked] == [1, 0]
    stats = collection_stats(analyse_query("allergies"), docs)
    assert stats.expansions == {"allergi": ("allerg",)}
    assert stats.df == {"allergi": 0, "allerg": 2}


@given(corpus=texts)
def test_index_statistics_equal_those_of_the_same_set(corpus: list[str]) -> None:
    index = TermIndex()
    docs = []
    for i, text in enumerate([*corpus, "allergic apples", "allergies"]):
        a = analyse(text)
        index.add(i, a.tf, a.length)
        docs.append((i, a, i))
    q = analyse_query("allergy apple river")
    assert index.stats(q.terms) == collection_stats(q, docs)


@given(
    axes=st.lists(st.integers(0, 3), max_size=30),
    query_axis=st.integers(0, 3),
    k=st.integers(1, 6),
)
def test_the_stacked_table_gives_the_ranking_of_every_cosine(
    axes: list[int], query_axis: int, k: int
) -> None:
    """The cached path hands rank() only the table's nearest (ties with the k-th included) and
    the lexical matches; the ranking must equal the one from every cell's cosine."""
    basis = [(1.0, 0.0), (0.0, 1.0), (0.6, 0.8), (0.8, 0.6)]
    docs = [(i, analyse(f"cell {i % 3}"), i) for i in range(len(axes))]
    vectors = [basis[a] for a in axes]
    q = analyse_query("cell 1")
    w = Weights(lexical=1.0, semantic=2.0, floor=0.5, dense_k=k)
    sims = cosines(basis[query_axis], vectors)  # the uncached path's cosines
    everything = [(i, c, i) for i, c in enumerate(sims)]
    table = VectorTable(list(enumerate(vectors)))
    lexical = {r.key for r in rank(q, docs)}
    near = table.nearest(basis[query_axis], w.floor, w.dense_k, lexical)
    part = [(key, c, key) for key, c in near.items()]
    full = [(r.key, round(r.score, 6)) for r in rank(q, docs, dense=everything, weights=w)]
    assert [(r.key, round(r.score, 6)) for r in rank(q, docs, dense=part, weights=w)] == full


def test_a_turns_context_counts_in_meaning_and_the_gate_decides_answerable() -> None:
    """Issue 33: a dialogue turn gets credit for the turns around it that are near the query
    (a reply far in meaning from the question it answers). The gate decides whether the
    question is about anything remembered (a cell shares a word, or one is at the gate);
    if it is, the cells at or above the lower floor join; if not, the answer is empty."""
    w = Weights(lexical=1.0, semantic=1.0, floor=0.2, dense_k=10, gate=0.5, context=1.0)
    fused = weighted_sum({"a": 2.0}, {"a": 0.2, "b": 0.6}, w, context={"a": 0.6})
    assert math.isclose(fused["a"], 1.0 + 1.0 * (0.6 - 0.2) / 0.8)
    assert math.isclose(fused["b"], (0.6 - 0.2) / 0.8)
    q = analyse_query("what theme does the user like")
    # 0 and 1 share words: answerable, so 3 (shares nothing, 0.4: under the gate, over the
    # floor) joins, by its credit alone.
    dense = [(0, 0.1, 0), (1, 0.3, 1), (2, 0.9, 2), (3, 0.4, 3)]
    plain = rank(q, DOCS, dense=dense, weights=w)
    assert [r.key for r in plain] == [0, 2, 1, 3]
    assert math.isclose(plain[3].score, (0.4 - 0.2) / 0.8)
    # A question that shares no word with any cell: nothing at the gate gives [] ...
    nothing = analyse_query("quarterly revenue forecast")
    under = [(0, 0.1, 0), (1, 0.3, 1), (2, 0.49, 2), (3, 0.4, 3)]
    assert rank(nothing, DOCS, dense=under, weights=w) == []
    # ... one cell at the gate makes it answerable: the cells over the floor join it.
    at = [(0, 0.1, 0), (1, 0.3, 1), (2, 0.5, 2), (3, 0.4, 3)]
    assert [r.key for r in rank(nothing, DOCS, dense=at, weights=w)] == [2, 3, 1]
    assert w.joins == 0.2 and Weights(1.0, 1.0, 0.3, 10, gate=0.2).joins == 0.2

    def around(key: object) -> list[object]:
        return [2] if key == 1 else []  # 1 is a turn whose neighbour 2 is near the query

    turned = fuse(rank(q, DOCS), dense, w, around)
    assert [r.key for r in turned] == [1, 0, 2, 3]
    assert Weights(1.0, 1.0, 0.3, 10).admits == 0.3  # no gate: the floor


FACTS = [
    "She hates cilantro; it tastes like soap.",
    "She prefers window seats on planes.",
    "Her mother lives in Pune.",
]


def test_a_stated_fact_sharing_one_incidental_word_does_not_outrank_meaning() -> None:
    """A stated fact stands alone (docs/retrieval.md "Semantic stage"): its lexical part is
    its share of the query's IDF, so "like" in "tastes like soap" does not put it above the
    fact the question is about; a dialogue turn keeps the normalisation by the best match."""
    q = analyse_query("Where does she like to sit when flying?")
    docs = [(i, analyse(t), i) for i, t in enumerate(FACTS)]
    w = Weights(lexical=1.0, semantic=1.0, floor=0.2, dense_k=10, gate=0.32, context=0.6)
    dense = [(0, 0.22, 0), (1, 0.71, 1), (2, 0.10, 2)]
    lexical = rank(q, docs)
    assert [r.key for r in lexical] == [0]  # "like" is the one shared word
    ideal = query_idf(q, collection_stats(q, docs))
    assert ideal > lexical[0].score

    def alone(key: object) -> list[object]:
        return [key]  # each is a stated fact: its context is itself

    facts = fuse(lexical, dense, w, alone, ideal)
    assert [r.key for r in facts] == [1, 0]
    credit = (0.71 - 0.2) / 0.8
    assert math.isclose(facts[0].score, credit + 0.6 * credit)
    share = lexical[0].score / ideal
    assert math.isclose(facts[1].score, share + 1.6 * (0.22 - 0.2) / 0.8)

    def turns(key: object) -> list[object]:
        return []  # dialogue turns with nothing around them: the best match normalises

    assert [r.key for r in fuse(lexical, dense, w, turns, ideal)] == [0, 1]
