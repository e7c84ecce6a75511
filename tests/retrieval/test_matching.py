"""docs/retrieval.md "Matching": containment stays the baseline, stems and case folding widen
it, a query that shares nothing matches nothing (saihm-protocol "saihm_recall": "Matching is
operator-defined; keyword containment is the baseline")."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import saihm.retrieval
from saihm.retrieval import analyse, analyse_query, matches
from saihm.retrieval.stopwords import STOP_WORDS

words = st.text(alphabet="abcdefgh ÄÖßİ\u2019'-.,!?", min_size=0, max_size=40)


def baseline(query: str, text: str) -> bool:
    """The filter recall used before: every white-space term a substring, ignoring case."""
    return all(term in text.casefold() for term in query.casefold().split())


@given(query=words, text=words)
def test_everything_the_baseline_matched_still_matches(query: str, text: str) -> None:
    if baseline(query, text):
        assert matches(query, text)


@given(text=words)
def test_absent_or_empty_query_matches_every_cell(text: str) -> None:
    assert matches(None, text)
    assert matches("", text)
    assert matches("   ", text)


@given(query=st.text(alphabet="abcdef ", min_size=1), text=st.text(alphabet="uvwxyz ", min_size=0))
def test_a_query_sharing_nothing_matches_nothing(query: str, text: str) -> None:
    if query.split():
        assert not matches(query, text)


def test_the_issue_example_now_matches() -> None:
    assert matches("what theme does the user like?", "The user prefers dark mode")
    assert not baseline("what theme does the user like?", "The user prefers dark mode")


def test_stems_match_other_word_forms() -> None:
    assert matches("climbing", "I climb on Saturdays")
    assert matches("preferred themes", "my preference: dark theme")
    assert analyse_query("Running runners").terms == ("run", "runner")


def test_unicode_case_folding() -> None:
    assert matches("STRASSE", "die Straße")
    assert analyse("Straße").folded == "strasse"


def test_stop_words_alone_do_not_make_a_match() -> None:
    assert "the" in STOP_WORDS
    assert analyse_query("the of and").terms == ()
    assert not matches("the of and", "a cat sat")
    # ...but containment, the baseline, still applies to them.
    assert matches("the", "weather")


def test_tokens_and_apostrophes() -> None:
    assert analyse("Dark-Mode, user\u2019s choice").tf == {
        "dark": 1,
        "mode": 1,
        "user": 1,
        "choic": 1,
    }


def test_retrieval_is_pure() -> None:
    """Text in, ranking out: no store, no cryptography, no LMDB in saihm/retrieval."""
    root = Path(saihm.retrieval.__file__).parent
    allowed_saihm = {"saihm.errors", "saihm.retrieval"}
    bad = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in {"lmdb", "cryptography", "cbor2", "pqcrypto"}:
                    bad.append(f"{path.name}: {name}")
                if top == "saihm" and not any(name.startswith(a) for a in allowed_saihm):
                    bad.append(f"{path.name}: {name}")
    assert not bad, bad
