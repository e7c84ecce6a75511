"""``saihm memory mcp``: RFC 0007 Phase C tools through a real MCP client and a real operator.

RFC 0007 "Phase C notes": "get_memory_context filters requested namespaces down to what the
grant allows and rejects out-of-scope requests." The server is separate from ``saihm-mcp``,
which keeps exactly the protocol's eight tools.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import mcp
import pytest
from mcp import StdioServerParameters

from saihm.client._env import EnvSettings
from saihm.provider.mcp import MEMORY_TOOL_NAMES, MemoryEndpoint, build_memory_mcp
from tests.support.serve import SAIHM, serving

MODULE = Path(__file__).resolve().parents[2] / "saihm" / "provider" / "mcp.py"


def cli(*argv: str) -> dict:
    done = subprocess.run([SAIHM, *argv], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def endpoint(url: str | None, token: str | None) -> MemoryEndpoint:
    auth = None if token is None else f"Bearer {token}"
    return MemoryEndpoint(EnvSettings(endpoint_url=url, auth_header=auth, timeout_seconds=30))


def stdio(env: dict[str, str]) -> StdioServerParameters:
    full = {k: v for k, v in os.environ.items() if not k.startswith("SAIHM_")}
    full.update(env)
    return StdioServerParameters(command=SAIHM, args=["memory", "mcp"], env=full)


def records(result) -> list[dict]:
    return result.structured_content["records"]


@pytest.mark.anyio
async def test_lists_exactly_two_tools_without_contacting_the_operator() -> None:
    # Port 9 on loopback answers nothing: listing must not need it.
    server = build_memory_mcp(endpoint("http://127.0.0.1:9/", "x"))
    async with mcp.Client(server, raise_exceptions=True) as client:
        tools = await client.list_tools()
    assert sorted(t.name for t in tools.tools) == sorted(MEMORY_TOOL_NAMES)
    assert all(t.annotations.read_only_hint for t in tools.tools)


@pytest.mark.anyio
async def test_missing_configuration_is_a_tool_error_that_quotes_no_secret() -> None:
    server = build_memory_mcp(endpoint("https://user:hunter2@example.invalid/", "sekrit-tok"))
    async with mcp.Client(server, raise_exceptions=True) as client:
        got = await client.call_tool("get_memory_context", {})
    async with mcp.Client(build_memory_mcp(endpoint(None, None)), raise_exceptions=True) as bare:
        unset = await bare.call_tool("get_passport_context", {})
    for result in (got, unset):
        assert result.is_error and result.structured_content == {"error": "config"}
    printed = got.content[0].text + json.dumps(got.structured_content)
    assert "hunter2" not in printed and "sekrit-tok" not in printed


def test_the_module_imports_no_store_code_and_no_cryptography() -> None:
    tree = ast.parse(MODULE.read_text())
    names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    forbidden = (
        "saihm.store",
        "saihm.operator",
        "saihm.keyring",
        "saihm.provider.vault",
        "saihm.authority",
        "cryptography",
        "lmdb",
        "cbor2",
    )
    assert not [n for n in names if n.startswith(forbidden)]


def test_saihm_mcp_keeps_exactly_eight_tools() -> None:
    from saihm.mcp.server import TOOL_NAMES

    assert len(TOOL_NAMES) == 8 and not set(TOOL_NAMES) & set(MEMORY_TOOL_NAMES)


@pytest.mark.anyio
async def test_tools_against_a_real_saihm_serve(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        d = ("--data", str(data))
        cli("memory", "init", *d)
        store_projects = ("memory", "store", *d, "--namespace", "projects", "--json")
        older = cli(*store_projects, '{"name": "saihm", "lang": "python"}')["id"]
        newer = cli(*store_projects, '{"name": "kettle", "note": "green tea"}')["id"]
        cli("memory", "store", *d, "--namespace", "health", "--json", '{"x": "private"}')
        token = cli(
            "memory", "grant", "cursor", *d, "--memory", "projects", "--sections", "identity,coding"
        )["token"]

        server = build_memory_mcp(endpoint(url, token))
        async with mcp.Client(server, raise_exceptions=True) as client:
            every = await client.call_tool("get_memory_context", {})
            assert not every.is_error
            assert [r["id"] for r in records(every)] == [newer, older]  # grant-filtered, newest
            assert {r["namespace"] for r in records(every)} == {"projects"}

            refused = await client.call_tool("get_memory_context", {"namespaces": ["health"]})
            assert refused.is_error
            assert refused.structured_content["error"] == "namespace_not_granted"
            assert "private" not in refused.content[0].text

            one = await client.call_tool(
                "get_memory_context", {"limit": 1, "intent": "coding_context"}
            )
            assert [r["id"] for r in records(one)] == [newer]
            assert one.structured_content["truncated"] is True

            # The sealed wrapper's key ("saihm-memory") matches nothing: its word "memory" is
            # in no value ("saihm" is, as the value of "name", so it would match that record).
            marker = await client.call_tool("get_memory_context", {"text": "memory"})
            assert records(marker) == []
            field = await client.call_tool("get_memory_context", {"text": "lang"})
            assert records(field) == []  # nor does a field name
            value = await client.call_tool("get_memory_context", {"text": "PYTHON"})
            assert [r["id"] for r in records(value)] == [older]

            passport = await client.call_tool("get_passport_context", {})
            assert not passport.is_error
            body = passport.structured_content
            assert body["consumer"] == "cursor" and body["memory"]["provider"] == "local-vault"
            assert [r["id"] for r in body["memory"]["excerpt"]["records"]] == [newer, older]
            assert body["grant"] == {"mode": "read", "namespaces": ["projects"]}
            assert body["sections"] == ["identity", "coding"]
            narrowed = await client.call_tool("get_passport_context", {"sections": ["coding"]})
            assert narrowed.structured_content["sections"] == ["coding"]
            outside = await client.call_tool("get_passport_context", {"sections": ["health"]})
            assert outside.is_error
            assert outside.structured_content["error"] == "section_not_granted"

            forgot = cli("memory", "forget", *d, newer)
            assert forgot["erased"] is True and forgot["receiptId"]
            after = await client.call_tool("get_memory_context", {})
            assert [r["id"] for r in records(after)] == [older]

            cli("memory", "revoke", *d, "cursor")
            revoked = await client.call_tool("get_passport_context", {})
            assert revoked.is_error and revoked.structured_content["error"] == "unauthenticated"
            assert token not in revoked.content[0].text

        # A wrong path under the operator is a refusal with the operator's code, not a crash.
        wrong = build_memory_mcp(endpoint(url + "nowhere/", token))
        async with mcp.Client(wrong, raise_exceptions=True) as client:
            lost = await client.call_tool("get_memory_context", {})
        assert lost.is_error
        assert lost.structured_content == {"error": "not_found", "httpStatus": 404}

        # Once through the real stdio console path, as an MCP host starts it.
        token = cli("memory", "grant", "cursor", *d, "--memory", "projects")["token"]
        env = {"SAIHM_ENDPOINT_URL": url, "SAIHM_AUTH_HEADER": f"Bearer {token}"}
        async with mcp.Client(stdio(env)) as host:
            names = sorted(t.name for t in (await host.list_tools()).tools)
            assert names == sorted(MEMORY_TOOL_NAMES)
            got = await host.call_tool("get_memory_context", {"namespaces": ["projects"]})
            assert [r["id"] for r in records(got)] == [older]


@pytest.mark.anyio
async def test_stdio_server_lists_its_tools_with_no_operator_and_no_settings() -> None:
    async with mcp.Client(stdio({})) as host:
        names = sorted(t.name for t in (await host.list_tools()).tools)
    assert names == sorted(MEMORY_TOOL_NAMES)


def test_memory_forget_refuses_a_bad_id_with_one_line(tmp_path: Path) -> None:
    from saihm.compose import initialise
    from saihm.config import Config

    data = tmp_path / "data"
    initialise(Config.for_data(data))
    cli("memory", "init", "--data", str(data))
    done = subprocess.run(
        [SAIHM, "memory", "forget", "--data", str(data), "zz"], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "64 hex" in done.stderr
    gone = subprocess.run(
        [SAIHM, "memory", "forget", "--data", str(data), "00" * 32],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(gone.stdout)["erased"] is False
    assert sys.executable  # the console script is the one beside this interpreter


async def test_a_body_that_is_not_json_is_a_refusal_or_an_intermediary(aiohttp_server) -> None:
    from aiohttp import web

    from saihm.client import ClientError

    async def page(request: web.Request) -> web.Response:
        status = 404 if request.path.endswith("/query") else 200
        return web.Response(text="<html>portal</html>", status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", page)
    server = await aiohttp_server(app)
    target = endpoint(f"http://127.0.0.1:{server.port}/", "tok")
    assert await target.call("query", {}) == (404, None)
    with pytest.raises(ClientError) as caught:
        await target.call("status", None)
    assert caught.value.kind == "intermediary"
