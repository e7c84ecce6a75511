"""SaihmStore against a real ``saihm serve``: LangGraph's store contract, ported.

LangGraph publishes no conformance suite for ``BaseStore`` implementations
(``langgraph-checkpoint-conformance`` covers checkpointers only). The cases below are the
documented behaviour of ``langgraph.store.base`` as LangGraph's own store tests state it
(libs/checkpoint/tests/test_store.py for InMemoryStore, libs/checkpoint-postgres/tests/
test_store.py for PostgresStore), rewritten here against SaihmStore; then the SAIHM rules:
updates are supersede (both logged), the adapter never shows the credential, two processes.
Each test gets a new holder, so an empty store.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.optional import require_module

require_module("langgraph.store.base", "langgraph")

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from saihm.client import Client, ClientError
from saihm.integrations.langgraph import SaihmStore
from tests.support.serve import SAIHM, fetch, holder_create, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("lg")
    data = tmp / "data"
    with serving(tmp, "--data", str(data)) as (_, url):
        yield url, data


@pytest.fixture
def holder(served) -> tuple[str, str]:
    """(url, auth header) of a new holder: an empty store."""
    url, data = served
    return url, f"Bearer {holder_create(data)['token']}"


@pytest.fixture
def store(holder) -> Iterator[SaihmStore]:
    with SaihmStore(*holder) as s:
        yield s


def _operations(url: str, holder_id: str) -> list[tuple[str, str]]:
    """(operation, subjectId) of the holder's receipts in the public log, in log order."""
    status, raw = fetch(url + f"log/v1/receipts?holderId={holder_id}&limit=1000")
    assert status == 200
    entries = json.loads(raw)["receipts"]
    return [(e["receipt"]["operation"], e["receipt"]["subjectId"]) for e in entries]


# -- ported: libs/checkpoint-postgres/tests/test_store.py ---------------------------------


def test_batch_order(store: SaihmStore) -> None:
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    results = store.batch(
        [
            GetOp(namespace=("test", "foo"), key="key1"),
            PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
            SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            GetOp(namespace=("test",), key="key3"),
        ]
    )
    assert len(results) == 5
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
    assert results[0].key == "key1"
    assert results[1] is None
    assert isinstance(results[2], list) and len(results[2]) == 1
    assert sorted(results[3]) == [("test", "bar"), ("test", "foo")]  # type: ignore[type-var]
    assert results[4] is None
    reordered = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
            GetOp(namespace=("test", "bar"), key="key2"),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
            PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
            GetOp(namespace=("test", "foo"), key="key1"),
        ]
    )
    assert isinstance(reordered[0], list) and len(reordered[0]) == 2
    assert isinstance(reordered[1], Item) and reordered[1].value == {"data": "value2"}
    assert isinstance(reordered[2], list) and len(reordered[2]) == 2
    assert reordered[3] is None
    assert isinstance(reordered[4], Item) and reordered[4].key == "key1"
    assert store.get(("test",), "key3").value == {"data": "value3"}  # type: ignore[union-attr]


def test_batch_get_ops(store: SaihmStore) -> None:
    store.put(("test",), "key1", {"data": "value1"})
    store.put(("test",), "key2", {"data": "value2"})
    results = store.batch(
        [GetOp(("test",), "key1"), GetOp(("test",), "key2"), GetOp(("test",), "key3")]
    )
    assert [r.key if r else None for r in results] == ["key1", "key2", None]  # type: ignore[union-attr]


def test_batch_put_ops(store: SaihmStore) -> None:
    results = store.batch(
        [
            PutOp(("test",), "key1", {"data": "value1"}),
            PutOp(("test",), "key2", {"data": "value2"}),
            PutOp(("test",), "key3", None),
        ]
    )
    assert results == [None, None, None]
    assert store.get(("test",), "key1").value == {"data": "value1"}  # type: ignore[union-attr]
    assert store.get(("test",), "key2").value == {"data": "value2"}  # type: ignore[union-attr]
    assert store.get(("test",), "key3") is None


def test_batch_search_ops(store: SaihmStore) -> None:
    for namespace, key, value in [
        (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
        (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
        (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]:
        store.put(namespace, key, value)
    results = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter={"tag": "a"}, limit=10, offset=0),
            SearchOp(namespace_prefix=("test",), filter=None, limit=2, offset=0),
            SearchOp(namespace_prefix=("test", "foo"), filter=None, limit=10, offset=0),
        ]
    )
    assert len(results[0]) == 2 and all(i.value["tag"] == "a" for i in results[0])  # type: ignore[union-attr,arg-type]
    assert len(results[1]) == 2  # type: ignore[arg-type]
    assert [i.namespace for i in results[2]] == [("test", "foo")]  # type: ignore[union-attr]


def test_batch_list_namespaces_ops(store: SaihmStore) -> None:
    data = [
        (("test", "documents", "public"), "doc1", {"content": "public doc"}),
        (("test", "documents", "private"), "doc2", {"content": "private doc"}),
        (("test", "images", "public"), "img1", {"content": "public image"}),
        (("prod", "documents", "public"), "doc3", {"content": "prod doc"}),
    ]
    for namespace, key, value in data:
        store.put(namespace, key, value)
    results = store.batch(
        [
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=2, limit=10, offset=0),
            ListNamespacesOp(
                match_conditions=(MatchCondition("suffix", ("public",)),), limit=10, offset=0
            ),
        ]
    )
    assert len(results[0]) == len(data)  # type: ignore[arg-type]
    assert sorted(results[1]) == [  # type: ignore[type-var]
        ("prod", "documents"),
        ("test", "documents"),
        ("test", "images"),
    ]
    assert sorted(results[2]) == [  # type: ignore[type-var]
        ("prod", "documents", "public"),
        ("test", "documents", "public"),
        ("test", "images", "public"),
    ]


def test_basic_store_ops(store: SaihmStore) -> None:
    namespace, key = ("test", "documents"), "doc1"
    store.put(namespace, key, {"title": "Test Document", "content": "Hello, World!"})
    item = store.get(namespace, key)
    assert item is not None
    assert (item.namespace, item.key) == (namespace, key)
    assert item.value == {"title": "Test Document", "content": "Hello, World!"}
    assert item.created_at == item.updated_at and item.created_at.tzinfo is not None
    store.put(namespace, key, {"title": "Updated Document", "content": "Hello, Updated!"})
    updated = store.get(namespace, key)
    assert updated is not None and updated.value["title"] == "Updated Document"
    assert updated.updated_at > item.updated_at
    assert updated.created_at == item.created_at
    assert store.get(("test", "other_documents"), key) is None
    store.delete(namespace, key)
    assert store.get(namespace, key) is None


def test_list_namespaces(store: SaihmStore) -> None:
    namespaces = [
        ("test", "documents", "public"),
        ("test", "documents", "private"),
        ("test", "images", "public"),
        ("test", "images", "private"),
        ("prod", "documents", "public"),
        ("prod", "documents", "private"),
    ]
    for namespace in namespaces:
        store.put(namespace, "dummy", {"content": "dummy"})
    assert sorted(store.list_namespaces()) == sorted(namespaces)
    assert len(store.list_namespaces(prefix=("test",))) == 4
    assert {ns[-1] for ns in store.list_namespaces(suffix=("public",))} == {"public"}
    assert len(store.list_namespaces(suffix=("public",))) == 3
    assert all(len(ns) <= 2 for ns in store.list_namespaces(max_depth=2))
    assert len(store.list_namespaces(limit=3)) == 3
    for namespace in namespaces:
        store.delete(namespace, "dummy")
    assert store.list_namespaces() == []


def test_search(store: SaihmStore) -> None:
    data = [
        (
            ("test", "docs"),
            "doc1",
            {"title": "First Doc", "author": "Alice", "tags": ["important"]},
        ),
        (("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["draft"]}),
        (("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"]}),
    ]
    for namespace, key, value in data:
        store.put(namespace, key, value)
    assert len(store.search(("test",))) == 3
    docs = store.search(("test", "docs"))
    assert len(docs) == 2 and all(i.namespace == ("test", "docs") for i in docs)
    alice = store.search(("test",), filter={"author": "Alice"})
    assert sorted(i.key for i in alice) == ["doc1", "img1"]
    assert len(store.search(("test",), limit=2)) == 2
    assert len(store.search(("test",), offset=2)) == 1
    assert [i.key for i in store.search(("test",), filter={"tags": ["draft"]})] == ["doc2"]
    # Most recently updated first, without a query.
    assert [i.key for i in store.search(("test",))] == ["img1", "doc2", "doc1"]


def test_numeric_comparison_filters(store: SaihmStore) -> None:
    namespace = ("test", "scores")
    for key, score in [("a", 2), ("b", 9), ("c", 10), ("d", 11), ("e", 9.5)]:
        store.put(namespace, key, {"score": score})

    def scores(filter_: dict) -> list:
        return sorted(i.value["score"] for i in store.search(namespace, filter=filter_))

    assert scores({"score": {"$gte": 10}}) == [10, 11]
    assert scores({"score": {"$gt": 9}}) == [9.5, 10, 11]
    assert scores({"score": {"$lt": 10}}) == [2, 9, 9.5]
    assert scores({"score": {"$lte": 9}}) == [2, 9]
    assert scores({"score": {"$ne": 9}}) == [2, 9.5, 10, 11]
    assert scores({"score": {"$eq": 10}}) == [10]
    store.put(("test", "names"), "a", {"name": "apple"})
    store.put(("test", "names"), "b", {"name": "banana"})
    found = store.search(("test", "names"), filter={"name": {"$gt": "apple"}})
    assert [i.value["name"] for i in found] == ["banana"]
    with pytest.raises(ValueError, match="unsupported filter operator"):
        store.search(namespace, filter={"score": {"$regex": "1"}})


# -- ported: libs/checkpoint/tests/test_store.py (list_namespaces, namespace rules) ---------


def test_list_namespaces_basic(store: SaihmStore) -> None:
    namespaces = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    store.batch(
        [PutOp(ns, f"id_{i}", {"data": f"value_{i:02d}"}) for i, ns in enumerate(namespaces)]
    )
    lst = store.list_namespaces
    assert lst(prefix=("a", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert lst(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert lst(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert lst(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert lst(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert lst(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert lst(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert lst(suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert lst(prefix=("nonexistent",)) == []
    assert lst(prefix=("users", "123")) == [("users", "123")]


def test_list_namespaces_with_wildcards(store: SaihmStore) -> None:
    namespaces = [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
        ("admin", "users", "789"),
        ("guests", "123"),
        ("guests", "456", "preferences"),
    ]
    store.batch([PutOp(ns, f"id_{i}", {"data": i}) for i, ns in enumerate(namespaces)])
    assert store.list_namespaces(prefix=("users", "*")) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert store.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []


def test_list_namespaces_pagination_and_depth(store: SaihmStore) -> None:
    store.batch([PutOp(("namespace", f"sub_{i:02d}"), f"id_{i}", {"i": i}) for i in range(20)])
    for offset in (0, 5, 15):
        got = store.list_namespaces(prefix=("namespace",), limit=5, offset=offset)
        assert got == [("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]
    store.batch(
        [
            PutOp(ns, "k", {"d": 1})
            for ns in [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g")]
        ]
    )
    assert store.list_namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "g")]


def test_list_namespaces_empty_store(store: SaihmStore) -> None:
    assert store.list_namespaces() == []
    assert store.search(()) == []


def test_namespaces_langgraph_forbids_are_refused_before_sending(store: SaihmStore) -> None:
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            asyncio.run(store.aput(bad, "foo", doc))
    # A "langgraph" label below the root is fine; past the public put API, so is the root.
    store.put(("foo", "langgraph", "foo"), "bar", doc)
    assert store.get(("foo", "langgraph", "foo"), "bar").value == doc  # type: ignore[union-attr]
    assert store.search(("foo", "langgraph", "foo"))[0].value == doc
    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])
    assert store.get(("langgraph", "foo"), "bar").value == doc  # type: ignore[union-attr]
    store.delete(("langgraph", "foo"), "bar")
    assert store.get(("langgraph", "foo"), "bar") is None
    # SAIHM's own bound: an encoded namespace is at most 256 characters.
    store.put(("x" * 253,), "k", doc)
    with pytest.raises(InvalidNamespaceError, match="at most 253"):
        store.put(("x" * 254,), "k", doc)
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a.b",), "k", doc)])  # "a.b" must not address ("a", "b")
    assert store.list_namespaces() == [("foo", "langgraph", "foo"), ("x" * 253,)]


def test_async_operations_match_sync(store: SaihmStore) -> None:
    async def run() -> None:
        await store.aput(("test",), "doc1", {"text": "red apple", "n": 1})
        await store.aput(("test", "sub"), "doc2", {"text": "green apple", "n": 2})
        got = await store.aget(("test",), "doc1")
        assert got is not None and got.value["n"] == 1
        assert len(await store.asearch(("test",))) == 2
        assert [i.key for i in await store.asearch(("test",), filter={"n": {"$gt": 1}})] == ["doc2"]
        assert await store.alist_namespaces() == [("test",), ("test", "sub")]
        results = await asyncio.gather(*(store.aget(("test",), "doc1") for _ in range(3)))
        assert all(r == got for r in results)
        await store.adelete(("test",), "doc1")
        assert await store.aget(("test",), "doc1") is None

    asyncio.run(run())
    assert store.get(("test", "sub"), "doc2").value["text"] == "green apple"  # type: ignore[union-attr]


# -- the query: the operator's recall ranking ---------------------------------------------


def test_search_with_query_uses_the_operators_ranking(store: SaihmStore) -> None:
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]
    store.batch([PutOp(("test",), key, value) for key, value in docs])
    store.put(("other",), "doc5", {"text": "apple pie"})
    apples = store.search(("test",), query="apple")
    assert sorted(i.key for i in apples) == ["doc1", "doc3"]  # only matches, only the prefix
    assert all(isinstance(i.score, float) for i in apples)
    assert [i.key for i in store.search(("test",), query="apple", filter={"color": "red"})] == [
        "doc1"
    ]
    assert [i.key for i in store.search(("test",), query="car", limit=1, offset=1)] != []
    assert len(store.search((), query="apple")) == 3
    # An updated item is found by its new text only.
    store.put(("test",), "doc1", {"text": "yellow banana"})
    assert [i.key for i in store.search(("test",), query="apple")] == ["doc3"]
    assert [i.key for i in store.search(("test",), query="banana")] == ["doc1"]


# -- SAIHM's rules: supersede, logging, secrets, bad input, two processes ------------------


def test_an_update_is_supersede_and_both_are_logged(holder) -> None:
    url, auth = holder
    with SaihmStore(url, auth) as store, Client(url, auth) as client:
        store.put(("prefs",), "drink", {"tea": "green"})
        first = [c for c in client.recall(namespaces=["lg:prefs"])]
        assert len(first) == 1
        old_cell = first[0].cell_id
        holder_id = client.status().agent_id_hash_hex
        before = _operations(url, holder_id)
        store.put(("prefs",), "drink", {"tea": "oolong"})
        after = _operations(url, holder_id)
        new = after[len(before) :]
        live = client.recall(namespaces=["lg:prefs"])
        assert len(live) == 1 and live[0].cell_id != old_cell
        # One saihm_remember with supersedes: its two receipts, next to each other.
        assert [e for e in new if e[0] in ("REMEMBER", "FORGET")] == [
            ("REMEMBER", live[0].cell_id),
            ("FORGET", old_cell),
        ]
        assert live[0].supersedes == old_cell
        status, raw = fetch(url + "log/v1/erasures")
        assert status == 200 and old_cell in json.loads(raw)["cellIds"]
        store.delete(("prefs",), "drink")
        assert _operations(url, holder_id)[-1] == ("FORGET", live[0].cell_id)
        assert client.recall(namespaces=["lg:prefs"]) == []


def test_an_async_update_is_supersede_too(holder) -> None:
    url, auth = holder
    with SaihmStore(url, auth) as store, Client(url, auth) as client:
        asyncio.run(store.aput(("prefs",), "city", {"text": "lives in Leeds"}))
        [old] = client.recall(namespaces=["lg:prefs"])
        asyncio.run(store.aput(("prefs",), "city", {"text": "moved to York"}))
        [new] = client.recall(namespaces=["lg:prefs"])
        assert new.supersedes == old.cell_id and new.plaintext == "moved to York"
        assert asyncio.run(store.aget(("prefs",), "city")).value == {"text": "moved to York"}  # type: ignore[union-attr]


def test_an_item_is_stored_as_its_text_with_its_structure_beside_it(holder) -> None:
    """Recall, the person's page and MCP read a cell's text: an item's text is its value's
    text, and the key and value travel in ``metadata``, which the ranking never reads."""
    url, auth = holder
    with SaihmStore(url, auth) as store, Client(url, auth) as client:
        store.put(("prefs", "u1"), "mem-7f3a", {"text": "likes green tea"})
        store.put(("prefs", "u1"), "profile", {"name": "Priya", "diet": {"eats": "fish"}})
        cells = {c.metadata["key"]: c for c in client.recall() if c.metadata}
        assert cells["mem-7f3a"].plaintext == "likes green tea"
        assert cells["profile"].plaintext == "name: Priya\ndiet.eats: fish"
        assert "saihm-store" not in cells["profile"].plaintext
        assert cells["mem-7f3a"].metadata["value"] == {"text": "likes green tea"}
        # Ranked on the text only: neither the key nor the store's mark matches.
        assert [i.key for i in store.search(("prefs",), query="green tea")] == ["mem-7f3a"]
        assert store.search(("prefs",), query="mem-7f3a saihm-store") == []
        got = store.get(("prefs", "u1"), "profile")
        assert got is not None and got.value == {"name": "Priya", "diet": {"eats": "fish"}}


def test_an_item_written_as_a_json_document_is_still_read(holder) -> None:
    """Cells an earlier version wrote (the document as the text) stay items."""
    url, auth = holder
    legacy = '{"saihm-store":1,"key":"k","value":{"a":1},"created_at":5,"updated_at":6}'
    with Client(url, auth) as client:
        client.remember(legacy, namespace="lg:old")
    with SaihmStore(url, auth) as store, Client(url, auth) as client:
        assert store.get(("old",), "k").value == {"a": 1}  # type: ignore[union-attr]
        store.put(("old",), "k", {"a": 2})
        [cell] = client.recall(namespaces=["lg:old"])
        assert cell.plaintext == "2" and cell.supersedes is not None
        assert store.get(("old",), "k").created_at.timestamp() == 5e-6  # type: ignore[union-attr]


def test_a_refused_update_keeps_the_old_value(store: SaihmStore) -> None:
    store.put(("docs",), "big", {"text": "small enough"})
    with pytest.raises(ClientError) as caught:
        store.put(("docs",), "big", {"text": "x" * (2 << 20)})  # refused before sending
    assert caught.value.kind == "refused"
    with pytest.raises(ClientError) as caught:
        # Text and value together are over the operator's 1 MiB request bound.
        store.put(("docs",), "big", {"text": "x" * (600 << 10)})
    assert caught.value.http_status == 413
    assert store.get(("docs",), "big").value == {"text": "small enough"}  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        store.put(("docs",), "nan", {"x": float("nan")})
    with pytest.raises(TypeError):
        store.put(("docs",), "obj", {"x": object()})
    with pytest.raises(NotImplementedError):
        store.put(("docs",), "ttl", {"x": 1}, ttl=5)
    assert [i.key for i in store.search(("docs",))] == ["big"]


def test_foreign_cells_are_never_items(holder) -> None:
    url, auth = holder
    with Client(url, auth) as client:
        client.remember('{"saihm-store": 1, "key": "k", "value": {}, "created_at": 1}')
        client.remember(
            '{"saihm-store": 1, "key": "k", "value": {}, "created_at": 1, "updated_at": 1}',
            namespace="memory",
        )
        client.remember("not json", namespace="lg:test")
        client.record("said", '{"saihm-store": 1, "key": "k", "value": {}}')
    with SaihmStore(url, auth) as store:
        assert store.list_namespaces() == [] and store.search(()) == []
        assert store.get(("test",), "k") is None


def test_the_credential_never_shows(holder) -> None:
    url, auth = holder
    token = auth.split()[1]
    store = SaihmStore(url, auth)
    assert token not in repr(store) and token not in str(vars(store))
    refused = SaihmStore(url, "Bearer wrong-token-s3cret")
    with pytest.raises(ClientError) as caught:
        refused.get(("a",), "b")
    assert caught.value.code == "unauthenticated" and "s3cret" not in str(caught.value)
    store.close()
    refused.close()


def test_a_graph_remembers_across_threads(holder) -> None:
    """End to end: a compiled LangGraph graph with the store, two threads."""
    langgraph_graph = require_module("langgraph.graph", "langgraph")
    from typing import TypedDict

    from langgraph.store.base import BaseStore

    class State(TypedDict):
        user: str
        fact: str
        seen: list[str]

    def node(state: State, *, store: BaseStore) -> dict:
        namespace = ("memories", state["user"])
        if state["fact"]:
            store.put(namespace, f"fact-{len(store.search(namespace))}", {"text": state["fact"]})
        return {"seen": sorted(i.value["text"] for i in store.search(namespace))}

    builder = langgraph_graph.StateGraph(State)
    builder.add_node("remember", node)
    builder.add_edge(langgraph_graph.START, "remember")
    with SaihmStore(*holder) as store:
        graph = builder.compile(store=store)
        first = graph.invoke({"user": "u1", "fact": "likes green tea", "seen": []})
        assert first["seen"] == ["likes green tea"]
        second = graph.invoke({"user": "u1", "fact": "", "seen": []})
        assert second["seen"] == ["likes green tea"]
        other = asyncio.run(graph.ainvoke({"user": "u2", "fact": "", "seen": []}))
        assert other["seen"] == []


_RACER = """
import sys
from saihm.integrations.langgraph import SaihmStore
url, auth, name = sys.argv[1:4]
with SaihmStore(url, auth) as store:
    for i in range(8):
        store.put(("race",), "shared", {"by": name, "i": i})
        store.put(("race", name), f"k{i}", {"i": i})
"""


def test_two_processes_racing_on_one_key_leave_one_current_value(holder) -> None:
    url, auth = holder
    racers = [
        subprocess.Popen([sys.executable, "-c", _RACER, url, auth, name], stderr=subprocess.PIPE)
        for name in ("p1", "p2")
    ]
    for racer in racers:
        _, err = racer.communicate(timeout=300)
        assert racer.returncode == 0, err.decode()
    with SaihmStore(url, auth) as store, Client(url, auth) as client:
        current = store.get(("race",), "shared")
        assert current is not None and current.value["by"] in ("p1", "p2")
        assert current.value["i"] == 7  # each racer's last put is the later of its own
        for name in ("p1", "p2"):
            assert len(store.search(("race", name), limit=100)) == 8
        # Whatever the race left, the next put supersedes every cell of the key.
        store.put(("race",), "shared", {"by": "after"})
        assert len(client.recall(namespaces=["lg:race"])) == 1
        assert store.get(("race",), "shared").value == {"by": "after"}  # type: ignore[union-attr]


def _token_json(*args: str) -> dict:
    done = subprocess.run([SAIHM, *args], capture_output=True, check=True)
    return json.loads(done.stdout)


def test_the_store_sees_what_the_token_sees(served) -> None:
    """A session token: one session's items. A person's grant (--sessions all): every
    session's items; with --namespaces, only those (lg:...) namespaces, writes included."""
    url, data = served
    first = holder_create(data)
    holder_id, d = first["holderId"], str(data)
    with SaihmStore(url, f"Bearer {first['token']}") as store:
        store.put(("prefs",), "drink", {"tea": "green"})
        store.put(("notes",), "n1", {"text": "private note"})
    fresh = _token_json("session", "open", "--data", d, "--holder", holder_id)
    with SaihmStore(url, f"Bearer {fresh['token']}") as store:
        assert store.get(("prefs",), "drink") is None and store.list_namespaces() == []
    grant = ["grant", "--data", d, "--holder", holder_id, "--sessions", "all", "--ttl", "600"]
    wide = _token_json(*grant)
    with SaihmStore(url, f"Bearer {wide['token']}") as store:
        assert store.get(("prefs",), "drink").value == {"tea": "green"}  # type: ignore[union-attr]
        assert store.list_namespaces() == [("notes",), ("prefs",)]
    narrow = _token_json(*grant, "--namespaces", "lg:prefs")
    with SaihmStore(url, f"Bearer {narrow['token']}") as store:
        assert store.list_namespaces() == [("prefs",)]
        assert store.get(("notes",), "n1") is None
        with pytest.raises(ClientError) as caught:
            store.put(("notes",), "n2", {"text": "outside the grant"})
        assert caught.value.code == "not_holder"
        store.put(("prefs",), "drink", {"tea": "oolong"})  # a supersede inside the grant
    with SaihmStore(url, f"Bearer {wide['token']}") as store:
        assert store.get(("prefs",), "drink").value == {"tea": "oolong"}  # type: ignore[union-attr]
        assert store.get(("notes",), "n2") is None
