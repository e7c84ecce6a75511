"""Optional means absent (issue 32 item 10): RFC 0007's ``MemoryRecord`` declares
``confidence?: number``, ``verified_at?: string``, ``sources?: number``. A record stored
without them carries none of the three keys - never ``null``, which a strict typed client
rejects - on every surface: the HTTP provider routes, the CLI (query, export), and the
structured content of ``saihm memory mcp``. A record stored with one carries that one only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp
from aiohttp import web

from saihm.compose import initialise
from saihm.config import Config
from saihm.provider.http import add_routes
from saihm.provider.mcp import build_memory_mcp
from tests.provider.test_memory_mcp import endpoint
from tests.support.cli import run_command

OPTIONAL = ("confidence", "verified_at", "sources")


def _check(records: list[dict[str, Any]]) -> None:
    """Two records: ``{"plain": ...}`` stored bare, ``{"rated": ...}`` with confidence only."""
    by_content = {json.dumps(r["content"], sort_keys=True): r for r in records}
    plain = by_content['{"plain": true}']
    rated = by_content['{"rated": true}']
    assert [k for k in OPTIONAL if k in plain] == []
    assert rated["confidence"] == 0.5
    assert [k for k in OPTIONAL if k in rated] == ["confidence"]
    # Nothing else is left out: every required field stays.
    assert set(plain) == {"id", "namespace", "content", "created_at", "updated_at"}


def _fill(world) -> str:
    world.put("n", {"plain": True})
    world.put("n", {"rated": True}, confidence=0.5)
    return world.token("agent", ["n"])


async def test_http_routes_leave_unset_optional_fields_out(world, aiohttp_client) -> None:
    token = _fill(world)
    app = web.Application()
    add_routes(app, world.vault)
    client = await aiohttp_client(app)
    auth = {"Authorization": f"Bearer {token}"}
    query = await (await client.post("/memory/v1/query", json={}, headers=auth)).json()
    _check(query["records"])
    context = await (await client.post("/memory/v1/context", json={}, headers=auth)).json()
    _check(context["memory"]["excerpt"]["records"])


async def test_memory_mcp_structured_content_leaves_unset_optional_fields_out(
    world, aiohttp_server
) -> None:
    token = _fill(world)
    app = web.Application()
    add_routes(app, world.vault)
    server = await aiohttp_server(app)
    tools = build_memory_mcp(endpoint(f"http://127.0.0.1:{server.port}/", token))
    async with mcp.Client(tools, raise_exceptions=True) as client:
        excerpt = await client.call_tool("get_memory_context", {})
        passport = await client.call_tool("get_passport_context", {})
    assert not excerpt.is_error and not passport.is_error
    _check(excerpt.structured_content["records"])
    _check(passport.structured_content["memory"]["excerpt"]["records"])
    assert "null" not in excerpt.content[0].text


def test_cli_query_and_export_leave_unset_optional_fields_out(tmp_path: Path, capsys) -> None:
    data = str(tmp_path / "data")
    initialise(Config.for_data(data))

    def run(*argv: str) -> Any:
        action, *rest = argv
        assert run_command("memory", [action, "--data", data, *rest]) == 0
        return json.loads(capsys.readouterr().out)

    run("init")
    run("store", "--namespace", "n", "--json", '{"plain": true}')
    run("store", "--namespace", "n", "--json", '{"rated": true}', "--confidence", "0.5")
    token = run("grant", "agent", "--memory", "n")["token"]
    _check(run("query", "--consumer-token", token)["records"])
    _check(run("export", "--consumer-token", token)["memory"]["excerpt"]["records"])
