"""Excerpt limits, byte budget, truncation, record shape and RECALL receipts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from saihm.errors import Unauthenticated
from saihm.provider.models import MemoryContext, MemoryQuery, MemoryStore
from saihm.provider.records import record_size


def test_limit_bounds_records_and_sets_truncated(world):
    for i in range(5):
        world.put("notes", {"n": i})
    cursor = world.consumer("cursor", ["notes"])
    three = cursor.query(MemoryQuery(consumer="cursor", limit=3))
    assert [r.content["n"] for r in three.records] == [4, 3, 2]  # newest first
    assert three.truncated is True
    five = cursor.query(MemoryQuery(consumer="cursor", limit=5))
    assert len(five.records) == 5 and five.truncated is False


def test_byte_budget_bounds_the_excerpt(world):
    for i in range(4):
        world.put("notes", {"n": i, "pad": "x" * 100})
    cursor = world.consumer("cursor", ["notes"])
    full = cursor.query(MemoryQuery(consumer="cursor"))
    sizes = [record_size(r) for r in full.records]
    budget = sizes[0] + sizes[1]
    cut = cursor.query(MemoryQuery(consumer="cursor", max_bytes=budget))
    assert len(cut.records) == 2 and cut.truncated is True
    assert sum(record_size(r) for r in cut.records) <= budget
    none = cursor.query(MemoryQuery(consumer="cursor", max_bytes=sizes[0] - 1))
    assert none.records == () and none.truncated is True


def test_record_shape_and_metadata(world):
    rid = world.put(
        "preferences",
        {"fact": "User prefers vertical video"},
        confidence=0.99,
        verified_at="2026-07-06T00:00:00Z",
        sources=17,
    )
    (record,) = (
        world.consumer("cursor", ["preferences"]).query(MemoryQuery(consumer="cursor")).records
    )
    assert record.id == rid and len(rid) == 64
    assert record.content == {"fact": "User prefers vertical video"}
    assert (record.confidence, record.verified_at, record.sources) == (
        0.99,
        "2026-07-06T00:00:00Z",
        17,
    )
    assert record.created_at == "2027-01-15T08:00:00Z" == record.updated_at


def test_invalid_metadata_is_refused():
    with pytest.raises(ValidationError):
        MemoryStore(namespace="n", content={}, confidence=1.5)
    with pytest.raises(ValidationError):
        MemoryStore(namespace="n", content={}, verified_at="yesterday")
    with pytest.raises(ValidationError):
        MemoryQuery(consumer="c", limit=0)
    with pytest.raises(ValidationError):
        MemoryQuery(consumer="c", owner="someone")  # no caller-supplied filters


def test_foreign_cells_show_plaintext_content(world):
    access = world.store.authenticate(
        world.authority.issue(
            world.vault.meta.holder_id,
            world.vault.meta.session_id,
            __import__("saihm.events", fromlist=["CapabilityScope"]).CapabilityScope(),
            60,
            now=int(world.clock()),
        ).to_token()
    )
    world.operator.memory.remember(access, "plain words", namespace="notes")
    (record,) = world.consumer("cursor", ["notes"]).query(MemoryQuery(consumer="cursor")).records
    assert record.content == "plain words"


def test_text_filter_only_narrows(world):
    world.put("notes", {"topic": "python"})
    world.put("notes", {"topic": "rust"})
    world.put("secret", {"topic": "python"})
    cursor = world.consumer("cursor", ["notes"])
    got = cursor.query(MemoryQuery(consumer="cursor", text="python"))
    assert [(r.namespace, r.content) for r in got.records] == [("notes", {"topic": "python"})]


def test_every_read_is_a_recall_receipt_of_the_holder(world):
    world.put("notes", {"n": 1})
    cursor = world.consumer("cursor", ["notes"])
    before = world.recalls()
    cursor.query(MemoryQuery(consumer="cursor"))
    cursor.query(MemoryQuery(consumer="cursor", namespaces=("notes",), limit=1))
    from saihm.provider.models import GraphQuery

    cursor.graph(GraphQuery(consumer="cursor"))
    assert world.recalls() == before + 3
    holder = world.vault.meta.holder_id
    rows, _ = world.store.receipts("holderId", holder)
    from saihm.events import Receipt

    recalls = [Receipt.from_cbor(leaf) for _, leaf in rows]
    recalls = [r for r in recalls if r.operation == "RECALL"]
    assert len(recalls) == 3 and all(r.subject_id == holder for r in recalls)


def test_refused_reads_write_no_receipt(world):
    cursor = world.consumer("cursor", ["notes"])
    world.vault.revoke("cursor")
    before = world.recalls()
    with pytest.raises(Unauthenticated):
        cursor.query(MemoryQuery(consumer="cursor"))
    assert world.recalls() == before


def test_context_block(world):
    world.put("projects", {"name": "saihm"})
    excerpt = world.consumer("cursor", ["projects"]).query(MemoryQuery(consumer="cursor"))
    block = MemoryContext(excerpt=excerpt).block()
    assert block["memory"]["provider"] == "local-vault"
    assert block["memory"]["excerpt"]["records"][0]["content"] == {"name": "saihm"}
    assert block["memory"]["excerpt"]["truncated"] is False
