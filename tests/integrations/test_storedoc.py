"""The LangGraph store's codec (saihm/integrations/_storedoc.py), with hypothesis: namespace
encoding is injective and round-trips, an item document round-trips, and LangGraph's
namespace matching and filters behave as langgraph.store.base documents them. Needs no
framework."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saihm.integrations import _storedoc as doc

LABEL = st.text(min_size=1, max_size=12).filter(lambda s: "." not in s and "\x00" not in s)
NAMESPACE = st.lists(LABEL, min_size=1, max_size=6).map(tuple)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet="abcé", max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(NAMESPACE)
def test_a_namespace_round_trips_through_its_saihm_name(namespace: tuple[str, ...]) -> None:
    try:
        name = doc.encode_namespace(namespace)
    except doc.InvalidLabel:
        assert len(".".join(namespace)) > doc.MAX_NAMESPACE_CHARS - len(doc.NAMESPACE_PREFIX)
        return
    assert 1 <= len(name) <= doc.MAX_NAMESPACE_CHARS
    assert doc.decode_namespace(name) == namespace


@given(NAMESPACE, NAMESPACE)
def test_two_namespaces_never_share_a_saihm_name(a: tuple[str, ...], b: tuple[str, ...]) -> None:
    if a != b:
        assert doc.encode_namespace(a) != doc.encode_namespace(b)


@pytest.mark.parametrize("bad", [(), ("",), ("a.b",), ("a", "b\x00"), (1,), ("x" * 254,)], ids=repr)
def test_namespaces_langgraph_forbids_are_refused(bad: tuple) -> None:
    with pytest.raises(doc.InvalidLabel):
        doc.encode_namespace(bad)


@pytest.mark.parametrize("name", [None, "memory", "record", "lg:", "lg:a..b", "lg:.a", "LG:a"])
def test_other_saihm_namespaces_decode_to_none(name: str | None) -> None:
    assert doc.decode_namespace(name) is None


@given(
    st.text(max_size=20),
    st.dictionaries(st.text(max_size=8), JSON, max_size=5),
    st.integers(0, doc.MAX_MICROS),
    st.integers(0, doc.MAX_MICROS),
    NAMESPACE,
)
def test_an_item_document_round_trips(key, value, created, updated, namespace) -> None:
    content = doc.item_content(key, value, created, updated)
    name = "lg:" + ".".join(namespace)
    if len(name) > 256:
        return
    item = doc.parse_item("c" * 64, name, "memory", False, content)
    assert item is not None
    assert (item.namespace, item.key, item.value) == (namespace, key, value)
    assert (item.created_at, item.updated_at) == (created, updated)
    # The same text is not an item as a record entry, another holder's cell, or elsewhere.
    assert doc.parse_item("c" * 64, name, "said", False, content) is None
    assert doc.parse_item("c" * 64, name, "memory", True, content) is None
    assert doc.parse_item("c" * 64, "memory", "memory", False, content) is None


@given(
    st.text(max_size=20),
    st.dictionaries(st.text(max_size=8), JSON, max_size=5),
    st.integers(0, doc.MAX_MICROS),
    NAMESPACE.filter(lambda n: len("lg:" + ".".join(n)) <= 256),
)
def test_an_item_round_trips_through_its_metadata_with_its_text_as_content(
    key, value, stamp, namespace
) -> None:
    metadata = doc.item_metadata(key, value, stamp, stamp)
    text = doc.value_text(key, value)
    assert text.strip()  # the operator refuses blank content
    assert doc.STORE_MARK not in text or doc.STORE_MARK in json.dumps(value)
    # Through JSON, as the operator keeps it.
    back = json.loads(json.dumps(metadata))
    item = doc.parse_item("c" * 64, "lg:" + ".".join(namespace), "memory", False, text, back)
    assert item is not None and (item.key, item.value) == (key, value)
    assert item.created_at == item.updated_at == stamp


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"text": "likes green tea"}, "likes green tea"),
        ({"content": "  padded  "}, "padded"),
        ({"n": 3}, "3"),
        (
            {"name": "Priya", "diet": {"eats": "fish", "since": 2024}},
            "name: Priya\ndiet.eats: fish\ndiet.since: 2024",
        ),
        ({"tags": ["tea", "green"]}, "tags: tea\ntags: green"),
        ({"blank": " ", "none": None, "list": []}, "the-key"),
        ({}, "the-key"),
    ],
)
def test_the_text_of_a_value_is_what_a_person_reads(value, text) -> None:
    assert doc.value_text("the-key", value) == text


def test_a_value_with_no_text_and_a_blank_key_is_still_not_blank() -> None:
    assert doc.value_text(" ", {}) == "(empty value)"


def test_metadata_decides_over_the_text() -> None:
    # With metadata present the text is never parsed as a document, and vice versa.
    legacy = doc.item_content("k", {"a": 1}, 1, 1)
    assert doc.parse_item("c" * 64, "lg:a", "memory", False, legacy, {"other": 1}) is None
    meta = doc.item_metadata("k", {"a": 1}, 1, 1)
    assert doc.parse_item("c" * 64, "lg:a", "memory", False, "1", meta) is not None
    assert doc.parse_item("c" * 64, "lg:a", "said", False, "1", meta) is None
    assert doc.parse_item("c" * 64, "lg:a", "memory", True, "1", meta) is None


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"saihm-store": 2, "key": "k", "value": {}, "created_at": 1, "updated_at": 1}',
        '{"saihm-store": 1, "key": 1, "value": {}, "created_at": 1, "updated_at": 1}',
        '{"saihm-store": 1, "key": "k", "value": [], "created_at": 1, "updated_at": 1}',
        '{"saihm-store": 1, "key": "k", "value": {}, "created_at": true, "updated_at": 1}',
        '{"saihm-store": 1, "key": "k", "value": {}, "created_at": 1}',
    ],
)
def test_documents_not_in_the_form_are_not_items(text: str) -> None:
    assert doc.parse_item("c" * 64, "lg:a", "memory", False, text) is None


def test_values_json_cannot_hold_exactly_are_refused() -> None:
    for value in ({"x": float("nan")}, {"x": float("inf")}):
        with pytest.raises(ValueError):
            doc.item_content("k", value, 0, 0)
    for value in ({"x": object()}, {"x": {1: "non-string key"}}, ["not", "a", "mapping"]):
        with pytest.raises(TypeError):
            doc.item_content("k", value, 0, 0)  # type: ignore[arg-type]


@given(st.integers(0, doc.MAX_MICROS - 1))
def test_timestamps_are_exact_microseconds(micros: int) -> None:
    when = doc.to_datetime(micros)
    assert when.tzinfo is UTC
    assert when - datetime(1970, 1, 1, tzinfo=UTC) == timedelta(microseconds=micros)
    assert doc.to_datetime(micros + 1) > when


def test_a_timestamp_datetime_cannot_hold_is_not_an_item() -> None:
    for bad in (-1, doc.MAX_MICROS + 1, 2**70):
        text = doc.item_content("k", {}, 0, 0).replace('"updated_at":0', f'"updated_at":{bad}')
        assert doc.parse_item("c" * 64, "lg:a", "memory", False, text) is None


def test_current_cell_is_the_latest_then_the_larger_cell_id() -> None:
    def cell(cid: str, updated: int) -> doc.StoredItem:
        return doc.StoredItem(cid * 64, ("a",), "k", {}, 0, updated)

    groups = doc.current([cell("1", 5), cell("3", 4), cell("2", 5)])
    assert [c.cell_id[0] for c in groups[(("a",), "k")]] == ["2", "1", "3"]


def _reference_match(match_type: str, path: tuple[str, ...], ns: tuple[str, ...]) -> bool:
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p in ("*", n) for n, p in zip(part, path, strict=True))


@given(
    st.sampled_from(["prefix", "suffix"]),
    st.lists(st.sampled_from(["a", "b", "*"]), max_size=4).map(tuple),
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=5).map(tuple),
)
def test_namespace_matching_is_langgraphs(match_type, path, namespace) -> None:
    assert doc.matches_path(match_type, path, namespace) == _reference_match(
        match_type, path, namespace
    )


@pytest.mark.parametrize(
    ("value", "filter_", "expected"),
    [
        ({"color": "red"}, {"color": "red"}, True),
        ({"color": "red"}, {"color": "blue"}, False),
        ({"color": "red"}, {"missing": "red"}, False),
        ({"score": 9}, {"score": {"$gte": 10}}, False),
        ({"score": 10}, {"score": {"$gte": 10, "$lt": 11}}, True),
        ({"score": 9.5}, {"score": {"$gt": 9}}, True),
        ({"score": "9"}, {"score": {"$gt": 1}}, False),
        ({"name": "banana"}, {"name": {"$gt": "apple"}}, True),
        ({"flag": True}, {"flag": 1}, False),
        ({"n": 1}, {"n": 1.0}, True),
        ({"n": 1}, {"n": {"$ne": 2}}, True),
        ({"meta": {"a": 1, "b": 2}}, {"meta": {"a": 1}}, True),
        ({"tags": ["x", "y"]}, {"tags": ["x", "y"]}, True),
        ({"tags": ["x", "y"]}, {"tags": ["x"]}, False),
        ({"a": 1}, None, True),
        ({"a": 1}, {}, True),
    ],
)
def test_filters_behave_as_langgraph_documents(value, filter_, expected) -> None:
    doc.check_filter(filter_)
    assert doc.matches_filter(value, filter_) is expected


def test_an_unknown_filter_operator_is_refused_before_sending() -> None:
    with pytest.raises(ValueError, match=r"\$regex"):
        doc.check_filter({"x": {"$regex": "a"}})
    with pytest.raises(ValueError):
        doc.check_filter(["not", "a", "mapping"])  # type: ignore[arg-type]


@given(st.dictionaries(st.text(alphabet="abc", max_size=6), JSON, max_size=4))
def test_a_value_matches_itself_as_a_filter(value: dict) -> None:
    roundtrip = json.loads(json.dumps(value))
    assert doc.matches_filter(
        roundtrip, {k: v for k, v in value.items() if not isinstance(v, dict)}
    )
