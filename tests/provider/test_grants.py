"""Grant scoping, revocation, mode and the consumer check (RFC 0007 "Permission model")."""

from __future__ import annotations

import pytest

from saihm.errors import NotPermitted, Unauthenticated
from saihm.events import CapabilityScope
from saihm.provider.interface import MemoryProvider
from saihm.provider.models import GraphQuery, MemoryQuery, MemoryStore


def test_consumer_sees_only_granted_namespaces(world):
    world.put("preferences", {"fact": "tabs"})
    world.put("projects", {"fact": "saihm"})
    world.put("health", {"fact": "private"})
    cursor = world.consumer("cursor", ["preferences", "projects"])
    excerpt = cursor.query(MemoryQuery(consumer="cursor"))
    assert {r.namespace for r in excerpt.records} == {"preferences", "projects"}
    assert {r.content["fact"] for r in excerpt.records} == {"tabs", "saihm"}
    assert excerpt.truncated is False


def test_requested_namespaces_narrow_but_never_widen(world):
    world.put("preferences", {"fact": "tabs"})
    world.put("projects", {"fact": "saihm"})
    cursor = world.consumer("cursor", ["preferences", "projects"])
    only = cursor.query(MemoryQuery(consumer="cursor", namespaces=("projects",)))
    assert [r.namespace for r in only.records] == ["projects"]
    with pytest.raises(NotPermitted) as err:
        cursor.query(MemoryQuery(consumer="cursor", namespaces=("projects", "health")))
    assert err.value.code == "namespace_not_granted"


def test_revocation_takes_effect_on_next_call(world):
    world.put("preferences", {"fact": "tabs"})
    cursor = world.consumer("cursor", ["preferences"])
    assert len(cursor.query(MemoryQuery(consumer="cursor")).records) == 1
    result = world.vault.revoke("cursor")
    assert result["revoked"] and result["changed"]
    with pytest.raises(Unauthenticated):
        cursor.query(MemoryQuery(consumer="cursor"))
    with pytest.raises(Unauthenticated):
        cursor.graph(GraphQuery(consumer="cursor"))


def test_regrant_withdraws_the_earlier_grant(world):
    world.put("preferences", {"fact": "tabs"})
    old = world.consumer("cursor", ["preferences"])
    new = world.consumer("cursor", ["preferences"])
    with pytest.raises(Unauthenticated):
        old.query(MemoryQuery(consumer="cursor"))
    assert len(new.query(MemoryQuery(consumer="cursor")).records) == 1


def test_grant_expiry(world):
    _, token = world.vault.grant("cursor", ["preferences"], "read", ttl=60)
    provider = world.vault.for_consumer(token)
    provider.query(MemoryQuery(consumer="cursor"))
    world.clock.now += 61
    with pytest.raises(Unauthenticated):
        provider.query(MemoryQuery(consumer="cursor"))


def test_mode_omitted_means_no_memory_access(world):
    grant, token = world.vault.grant("claude", [], None, sections=("identity",))
    assert token is None
    assert grant.memory is not None and grant.memory.mode is None
    assert world.vault.meta.consumers["claude"]["mode"] is None


def test_grant_is_logged_and_scoped(world):
    grant, token = world.vault.grant("cursor", ["projects"], "read", sections=("coding",))
    assert grant.model_dump(mode="json") == {
        "provider": "cursor",
        "sections": ["coding"],
        "memory": {"provider_id": "local-vault", "namespaces": ["projects"], "mode": "read"},
    }
    access = world.store.authenticate(token)
    assert (access.consumer, access.mode, access.all_sessions) == ("cursor", "read", True)
    assert access.namespaces == frozenset({"projects"})
    grant_id = bytes.fromhex(world.vault.meta.consumers["cursor"]["grantId"])
    assert access.grant_id == grant_id
    rows, _ = world.store.receipts("subjectId", grant_id)
    assert len(rows) == 1  # the GRANT receipt


def test_consumer_name_must_match_the_grant(world):
    cursor = world.consumer("cursor", ["preferences"])
    with pytest.raises(NotPermitted) as err:
        cursor.query(MemoryQuery(consumer="claude"))
    assert err.value.code == "consumer_mismatch"


def test_read_mode_cannot_store_and_write_mode_cannot_read(world):
    reader = world.consumer("reader", ["notes"], "read")
    with pytest.raises(NotPermitted):
        reader.store(MemoryStore(consumer="reader", namespace="notes", content={"x": 1}))
    writer = world.consumer("writer", ["notes"], "write")
    with pytest.raises(NotPermitted):
        writer.query(MemoryQuery(consumer="writer"))
    assert writer.status().capabilities == ("store",)


def test_non_consumer_tokens_are_refused(world):
    scope = CapabilityScope()
    token = world.authority.issue(
        world.vault.meta.holder_id,
        world.vault.meta.session_id,
        scope,
        60,
        now=int(world.clock()),
    ).to_token()
    with pytest.raises(NotPermitted) as err:
        world.vault.for_consumer(token).query(MemoryQuery(consumer="cursor"))
    assert err.value.code == "not_consumer"


def test_other_holders_cells_never_appear(world):
    other = world.operator.admin.create_holder()
    sid = b"\x01" * 32
    token = world.authority.issue(other, sid, CapabilityScope(), 60, now=int(world.clock()))
    access = world.store.authenticate(token.to_token())
    world.operator.memory.remember(access, "someone else's", namespace="preferences")
    world.put("preferences", {"fact": "mine"})
    excerpt = world.consumer("cursor", ["preferences"]).query(MemoryQuery(consumer="cursor"))
    assert [r.content for r in excerpt.records] == [{"fact": "mine"}]


def test_bound_provider_satisfies_the_protocol(world):
    cursor = world.consumer("cursor", ["preferences"], "readwrite")
    assert isinstance(cursor, MemoryProvider)
    status = cursor.status()
    assert status.id == "local-vault" and status.healthy
    assert set(status.capabilities) == {"query", "graph", "store"}
