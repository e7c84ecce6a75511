"""The ``/memory/v1`` aiohttp routes: bearer consumer tokens, the same checks as in process."""

from __future__ import annotations

from aiohttp import web

from saihm.provider.http import add_routes


async def test_routes(world, aiohttp_client):
    world.put("projects", {"name": "saihm"})
    world.put("health", {"x": 1})
    token = world.token("cursor", ["projects"], "readwrite")
    app = web.Application()
    add_routes(app, world.vault)
    client = await aiohttp_client(app)
    auth = {"Authorization": f"Bearer {token}"}

    resp = await client.post("/memory/v1/context", json={"consumer": "cursor"}, headers=auth)
    assert resp.status == 200
    body = await resp.json()
    assert body["memory"]["excerpt"]["records"][0]["content"] == {"name": "saihm"}
    assert len(body["memory"]["excerpt"]["records"]) == 1

    resp = await client.post(
        "/memory/v1/query", json={"consumer": "cursor", "namespaces": ["health"]}, headers=auth
    )
    assert resp.status == 403 and await resp.json() == {"error": "namespace_not_granted"}
    resp = await client.post("/memory/v1/query", json={"consumer": "cursor"})
    assert resp.status == 401
    resp = await client.post("/memory/v1/query", data=b"{", headers=auth)
    assert resp.status == 400
    resp = await client.post(
        "/memory/v1/store",
        json={"consumer": "cursor", "namespace": "projects", "content": {"a": 1}},
        headers=auth,
    )
    assert resp.status == 200 and (await resp.json())["state"] == "pending"
    assert (await (await client.get("/memory/v1/status", headers=auth)).json())["healthy"]
    resp = await client.post("/memory/v1/graph", json={"consumer": "cursor"}, headers=auth)
    assert resp.status == 200
    world.vault.revoke("cursor")
    resp = await client.post("/memory/v1/query", json={"consumer": "cursor"}, headers=auth)
    assert resp.status == 401
