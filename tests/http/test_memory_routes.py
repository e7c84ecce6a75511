"""The RFC 0007 consumer routes are mounted on the operator's own app (``/memory/v1``)."""

from __future__ import annotations

from saihm.provider.models import MemoryStore
from saihm.provider.vault import LocalVault


async def test_memory_routes_answer_not_found_until_init_then_serve_the_vault(
    client, operator, authority
) -> None:
    response = await client.get("/memory/v1/status", headers={"Authorization": "Bearer x"})
    assert response.status == 404 and await response.json() == {"error": "no_vault"}

    vault, created = LocalVault.init(operator, authority)
    assert created
    vault.store(MemoryStore(namespace="projects", content={"name": "saihm"}))
    _, token = vault.grant("cursor", ["projects"], "read")
    auth = {"Authorization": f"Bearer {token}"}
    response = await client.post("/memory/v1/query", json={"consumer": "cursor"}, headers=auth)
    assert response.status == 200
    (record,) = (await response.json())["records"]
    assert record["content"] == {"name": "saihm"} and record["namespace"] == "projects"
    response = await client.post("/memory/v1/query", json={"consumer": "cursor"})
    assert response.status == 401
