"""Namespaces are names (issue #32 item 6; docs/formats.md "Namespaces"): the one rule of
saihm.names, checked against Unicode's categories by hypothesis."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saihm.errors import ErrorCode, MalformedInput
from saihm.names import NAMESPACE_MAX, BadNamespace, check_namespace, namespace_problem

REFUSED_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")

#: Characters a name may hold: letters, marks, numbers, punctuation, symbols.
NAME_CHARS = st.characters(
    categories=("L", "M", "N", "P", "S"),
    exclude_characters="\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0",
)
#: Characters a name never holds.
REFUSED_CHARS = st.characters(categories=REFUSED_CATEGORIES) | st.characters(
    categories=("Zs",), exclude_characters=" "
)


def names() -> st.SearchStrategy[str]:
    """Names: printable words joined by single ASCII spaces, at most NAMESPACE_MAX long."""
    word = st.text(NAME_CHARS, min_size=1, max_size=20)
    return (
        st.lists(word, min_size=1, max_size=12)
        .map(" ".join)
        .filter(lambda s: len(s) <= NAMESPACE_MAX and s == s.strip())
    )


@given(names())
def test_a_printable_name_is_a_namespace(name: str) -> None:
    assert check_namespace(name) == name and namespace_problem(name) is None


@given(names(), REFUSED_CHARS, st.integers(min_value=0))
def test_one_refused_character_anywhere_refuses_it(name: str, bad: str, where: int) -> None:
    at = where % (len(name) + 1)
    with pytest.raises(BadNamespace) as refused:
        check_namespace(name[:at] + bad + name[at:])
    assert refused.value.code == ErrorCode.BAD_NAMESPACE == "bad_namespace"
    assert refused.value.status == 400 and isinstance(refused.value, MalformedInput)
    assert bad not in str(refused.value)  # the refusal never quotes the label


@given(st.text())
def test_whatever_is_accepted_is_printable_trimmed_and_bounded(value: str) -> None:
    if namespace_problem(value) is None:
        assert 1 <= len(value) <= NAMESPACE_MAX and value == value.strip()
        assert all(
            unicodedata.category(c) not in REFUSED_CATEGORIES
            and (unicodedata.category(c) != "Zs" or c == " ")
            for c in value
        )


@pytest.mark.parametrize(
    "value",
    [
        "a\x00b",
        "a\nb",
        "evil\u202etxt",
        "zero\u200bwidth",
        "\ufeffbom",
        "tag\U000e0041",
        "private\ue000",
        "lone\ud800",
        "unassigned\u0378",
        "line\u2028break",
        "no\u00a0break",
        "filler\u3164",
        "cgj\u034f",
        " lead",
        "trail ",
        "\ttab",
        "",
        "x" * (NAMESPACE_MAX + 1),
        None,
        7,
        ["work"],
    ],
)
def test_the_red_teams_labels_and_other_non_names_are_refused(value: object) -> None:
    assert namespace_problem(value) is not None
    with pytest.raises(BadNamespace):
        check_namespace(value)


@pytest.mark.parametrize(
    "value",
    ["memory", "work", "my notes", "préférences", "日本語", "emoji 🙂", "a.b-c_d/e", "x" * 256],
)
def test_ordinary_names_are_namespaces(value: str) -> None:
    assert check_namespace(value) == value
