"""The MCP surface: exactly eight tools with the protocol's names, inputs and annotations.

saihm-protocol "Tool surface (MCP binding)", "Session prompt", "Client conformance" 1-2.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mcp
import pytest

from saihm.mcp import build_mcp
from saihm.mcp.server import SESSION_PROMPT
from saihm.mcp.transport import OperatorClient
from tests.mcp.fake_operator import config

# name: (readOnly, destructive, idempotent, openWorld), required inputs, optional inputs
EXPECTED = {
    # supersedes: the extension param DESIGN.md pins ("the cellId of the fact this one
    # replaces"); the protocol grows a tool by extending its parameters.
    "saihm_remember": ((False, False, False, True), {"content"}, {"supersedes"}),
    "saihm_recall": ((True, False, True, True), set(), {"query"}),
    "saihm_forget": ((False, True, True, True), {"id"}, set()),
    "saihm_status": ((True, False, True, True), set(), set()),
    "saihm_share": (
        (False, False, False, True),
        {"granteeIdHashesHex", "shardIds", "type", "scope"},
        {"expiryEpoch"},
    ),
    "saihm_revoke_share": ((False, False, True, True), {"contractId"}, set()),
    "saihm_governance_propose": (
        (False, False, False, True),
        {"scope"},
        {"paramKey", "proposedValue"},
    ),
    "saihm_governance_vote": ((False, False, False, True), {"proposalId", "approve"}, set()),
}


@pytest.mark.anyio
async def test_exactly_eight_tools_with_protocol_inputs_and_annotations() -> None:
    server = build_mcp(OperatorClient(config("https://example.com/")))
    async with mcp.Client(server, raise_exceptions=True) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == set(EXPECTED)
    for name, (hints, required, optional) in EXPECTED.items():
        tool = tools[name]
        a = tool.annotations
        assert a is not None
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == hints
        schema = tool.input_schema
        assert set(schema.get("properties", {})) == required | optional, name
        assert set(schema.get("required", [])) == required, name
        assert tool.description
        assert tool.output_schema is not None


@pytest.mark.anyio
async def test_enumerated_inputs_follow_the_protocol() -> None:
    server = build_mcp(OperatorClient(config("https://example.com/")))
    async with mcp.Client(server, raise_exceptions=True) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    share = tools["saihm_share"].input_schema["properties"]
    assert share["type"]["enum"] == ["temporary", "permanent", "syndicate"]
    assert share["scope"]["enum"] == ["read", "write", "readwrite"]
    propose = tools["saihm_governance_propose"].input_schema["properties"]
    assert propose["scope"]["enum"] == ["emission_param", "protocol_upgrade"]
    assert tools["saihm_governance_vote"].input_schema["properties"]["approve"]["type"] == "boolean"


@pytest.mark.anyio
async def test_session_prompt_is_offered_and_is_not_a_tool() -> None:
    server = build_mcp(OperatorClient(config("https://example.com/")))
    async with mcp.Client(server, raise_exceptions=True) as client:
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        got = await client.get_prompt("saihm_session_bootstrap")
    assert prompts == ["saihm_session_bootstrap"]
    assert got.messages[0].content.text == SESSION_PROMPT
    assert "saihm_recall" in SESSION_PROMPT


def test_build_mcp_returns_a_new_server_each_time() -> None:
    client = OperatorClient(config("https://example.com/"))
    assert build_mcp(client) is not build_mcp(client)


def test_client_imports_no_cryptography_and_no_store() -> None:
    """Conformance 2: nothing from saihm but saihm.errors and the client library (which obeys
    the same rule), and no crypto or store library."""
    saihm = Path(__file__).resolve().parents[2] / "saihm"
    bad = []
    for path in [*(saihm / "mcp").rglob("*.py"), *(saihm / "client").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in {"cryptography", "lmdb", "pqcrypto", "cbor2", "hashlib", "hmac"}:
                    bad.append(f"{path.name}: {name}")
                allowed = ("saihm.errors", "saihm.mcp", "saihm.client")
                if top == "saihm" and not name.startswith(allowed):
                    bad.append(f"{path.name}: {name}")
    assert bad == []
