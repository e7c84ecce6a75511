"""Corrections through the RFC 0007 provider (issue 33 item 5): ``MemoryStore.supersedes``
names the record a new one replaces. The person's store replaces it at once; a consumer's
proposal replaces it when the person accepts, in the same change as the REMEMBER."""

from __future__ import annotations

import pytest
from aiohttp import web

from saihm.errors import NotFound, NotPermitted, SaihmError
from saihm.events import Receipt
from saihm.provider.http import add_routes
from saihm.provider.models import MemoryQuery, MemoryStore


def _operations(world, record_id: str) -> list[str]:
    """The operations of the receipts naming ``record_id``, in log order."""
    rows, _ = world.store.receipts("subjectId", bytes.fromhex(record_id))
    return [Receipt.from_cbor(leaf).operation.value for _index, leaf in rows]


def _live_contents(world) -> list[object]:
    reader = world.consumer(f"reader{len(world.vault.meta.consumers)}", ["notes"])
    return [r.content for r in reader.query(MemoryQuery()).records]


def test_the_persons_store_supersedes_in_one_change(world):
    old = world.put("notes", {"fact": "lives in Leeds"})
    before = world.store.size()
    new = world.vault.store(
        MemoryStore(namespace="notes", content={"fact": "moved to York"}, supersedes=old)
    )
    assert world.store.size() == before + 2  # REMEMBER of the new, FORGET of the old
    assert _operations(world, old)[-1] == "FORGET"
    assert _live_contents(world) == [{"fact": "moved to York"}]
    assert world.vault.forget(old)["erased"] is False and new.state == "stored"


def test_a_consumer_proposal_supersedes_when_accepted(world):
    old = world.put("notes", {"fact": "vegetarian"})
    agent = world.consumer("agent", ["notes"], "readwrite")
    ref = agent.store(
        MemoryStore(
            consumer="agent", namespace="notes", content={"fact": "eats fish"}, supersedes=old
        )
    )
    assert ref.state == "pending" and _live_contents(world) == [{"fact": "vegetarian"}]
    before = world.store.size()
    world.vault.accept(ref.id)
    assert world.store.size() == before + 2
    assert _operations(world, old)[-1] == "FORGET"
    assert _live_contents(world) == [{"fact": "eats fish"}]


def test_a_proposal_whose_record_was_erased_meanwhile_is_refused_and_stays_held(world):
    old = world.put("notes", {"fact": "vegetarian"})
    agent = world.consumer("agent", ["notes"], "readwrite")
    ref = agent.store(
        MemoryStore(consumer="agent", namespace="notes", content={"fact": "x"}, supersedes=old)
    )
    world.vault.forget(old)
    before = world.store.size()
    with pytest.raises(NotFound) as caught:
        world.vault.accept(ref.id)
    assert caught.value.code == "erased" and world.store.size() == before
    assert [p.id for p in world.vault.pending()] == [ref.id]


def test_a_consumer_cannot_supersede_what_its_grant_does_not_see(world):
    hidden = world.put("health", {"x": 1})
    agent = world.consumer("agent", ["notes"], "readwrite")
    with pytest.raises(NotPermitted):
        agent.store(
            MemoryStore(consumer="agent", namespace="notes", content={"f": 1}, supersedes=hidden)
        )
    with pytest.raises(SaihmError) as caught:
        agent.store(
            MemoryStore(consumer="agent", namespace="notes", content={"f": 1}, supersedes="ab" * 32)
        )
    assert caught.value.code == "not_found"
    assert world.vault.pending() == []


async def test_supersedes_over_http_and_a_bad_id_is_400(world, aiohttp_client):
    old = world.put("notes", {"fact": "old"})
    token = world.token("cursor", ["notes"], "readwrite")
    app = web.Application()
    add_routes(app, world.vault)
    client = await aiohttp_client(app)
    auth = {"Authorization": f"Bearer {token}"}
    body = {"consumer": "cursor", "namespace": "notes", "content": {"fact": "new"}}
    resp = await client.post("/memory/v1/store", json={**body, "supersedes": "XYZ"}, headers=auth)
    assert resp.status == 400 and world.vault.pending() == []
    resp = await client.post("/memory/v1/store", json={**body, "supersedes": old}, headers=auth)
    assert resp.status == 200
    world.vault.accept((await resp.json())["id"])
    assert _live_contents(world) == [{"fact": "new"}]
