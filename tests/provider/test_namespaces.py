"""The memory provider takes namespaces under the shared rule (issue #32 item 6;
docs/formats.md "Namespaces"): its HTTP bodies, its grants, ``saihm memory`` and its MCP tools
refuse a namespace that is not a name with ``bad_namespace``, and nothing is written."""

from __future__ import annotations

import mcp
import pytest
from aiohttp import web
from pydantic import ValidationError

from saihm.client._env import EnvSettings
from saihm.provider.http import add_routes
from saihm.provider.mcp import MemoryEndpoint, build_memory_mcp
from saihm.provider.records import parse_store, schema_refusal
from tests.provider.test_cli import run as run

BAD = ["a\x00b", "a\nb", "evil\u202etxt", "zero\u200bwidth", "trail ", "", "x" * 257]


@pytest.mark.parametrize("bad", BAD)
async def test_the_routes_refuse_it_and_write_nothing(world, aiohttp_client, bad: str) -> None:
    token = world.token("cursor", ["projects"], "readwrite")
    app = web.Application()
    add_routes(app, world.vault)
    client = await aiohttp_client(app)
    auth = {"Authorization": f"Bearer {token}"}
    size = world.store.size()
    for route, body in (
        ("query", {"consumer": "cursor", "namespaces": [bad]}),
        ("graph", {"consumer": "cursor", "namespaces": ["projects", bad]}),
        ("store", {"consumer": "cursor", "namespace": bad, "content": {"a": 1}}),
    ):
        resp = await client.post(f"/memory/v1/{route}", json=body, headers=auth)
        assert (resp.status, await resp.json()) == (400, {"error": "bad_namespace"}), route
    assert world.store.size() == size


@pytest.mark.parametrize("bad", BAD)
def test_the_persons_store_and_grants_refuse_it(world, bad: str) -> None:
    size = world.store.size()
    with pytest.raises(ValidationError) as caught:
        world.vault.grant("agent", ["projects", bad], "read")
    assert schema_refusal(caught.value).code == "bad_namespace"
    with pytest.raises(Exception) as refused:
        parse_store("{}", bad)
    assert getattr(refused.value, "code", None) == "bad_namespace"
    assert world.store.size() == size


def test_saihm_memory_refuses_it_in_one_line(run) -> None:
    for argv in (
        ("store", "--namespace", "evil\u202etxt", "--json", "{}"),
        ("grant", "agent", "--memory", "work,zero\u200bwidth"),
    ):
        line = run(*argv, ok=False)
        assert "namespace" in line, line


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["get_memory_context", "get_passport_context"])
async def test_the_mcp_tools_refuse_it_before_sending(tool: str) -> None:
    # Port 9 on loopback answers nothing: a refusal before sending never reaches it.
    endpoint = MemoryEndpoint(
        EnvSettings(endpoint_url="http://127.0.0.1:9/", auth_header="Bearer x", timeout_seconds=5)
    )
    async with mcp.Client(build_memory_mcp(endpoint), raise_exceptions=True) as client:
        got = await client.call_tool(tool, {"namespaces": ["work", "a\u202eb"]})
    assert got.is_error and got.structured_content == {"error": "bad_namespace"}
    assert "\u202e" not in got.content[0].text
