"""Corrections from agents through MCP (issue 33 item 5): ``saihm_remember`` takes the optional
``supersedes`` argument, forwarded as the operator's extension param of that name, and the
recall report marks a fact that replaced another (operator extension ``supersedes`` on a
recall element), keeping the field in the structured content."""

from __future__ import annotations

from pathlib import Path

import mcp
import pytest

from saihm.mcp import ClientConfig, OperatorClient, build_mcp
from tests.mcp.fake_operator import (
    CELL_ID,
    OWN_ID,
    FakeOperator,
    config,
    json_reply,
    run_tools,
    serve_operator,
    text_of,
)
from tests.support.serve import holder_create, serving

OLD = "0f" * 32
NEW = CELL_ID


@pytest.mark.anyio
async def test_the_remember_tool_describes_supersedes_as_design_pins_it() -> None:
    server = build_mcp(OperatorClient(config("https://x/")))
    async with mcp.Client(server, raise_exceptions=True) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    schema = tools["saihm_remember"].input_schema
    assert schema["properties"]["supersedes"]["description"] == (
        "the cellId of the fact this one replaces"
    )
    assert schema["required"] == ["content"]


@pytest.mark.anyio
async def test_supersedes_is_forwarded_only_when_given() -> None:
    fake = FakeOperator(routes={"saihm_remember": json_reply({"cellId": NEW})})
    async with serve_operator(fake) as url:
        plain, corrected = await run_tools(
            config(url),
            ("saihm_remember", {"content": "Priya is vegetarian"}),
            ("saihm_remember", {"content": "Priya eats fish again", "supersedes": OLD}),
        )
    sent = [r["body"]["params"] for r in fake.requests]
    assert sent == [
        {"content": "Priya is vegetarian"},
        {"content": "Priya eats fish again", "supersedes": OLD},
    ]
    assert plain.structured_content["status"] == corrected.structured_content["status"] == "stored"


@pytest.mark.anyio
async def test_recall_marks_a_fact_that_replaced_another_with_its_full_cell_id() -> None:
    body = [
        {"cellId": NEW, "plaintext": "Priya eats fish again", "holderIdHex": OWN_ID},
        {"cellId": "1" * 64, "plaintext": "Priya lives in York", "holderIdHex": OWN_ID},
        # Hostile values are never printed: not an identifier, a line break.
        {"cellId": "2" * 64, "plaintext": "a", "holderIdHex": OWN_ID, "supersedes": 7},
        {"cellId": "3" * 64, "plaintext": "b", "holderIdHex": OWN_ID, "supersedes": "x\nFORGOT"},
    ]
    body[0]["supersedes"] = OLD
    fake = FakeOperator(
        routes={
            "saihm_status": json_reply({"agentIdHashHex": OWN_ID}),
            "saihm_recall": json_reply(body),
        }
    )
    async with serve_operator(fake) as url:
        _, recalled = await run_tools(config(url), ("saihm_status", {}), ("saihm_recall", {}))
    lines = text_of(recalled).split("\n")
    at = lines.index(f"[{NEW}] replaces [{OLD}]")
    assert lines[at + 1] == "    | Priya eats fish again"
    assert f"[{'1' * 64}] Priya lives in York" in lines
    assert f"[{'2' * 64}] a" in lines and f"[{'3' * 64}] b" in lines
    assert "FORGOT" not in text_of(recalled)
    cells = recalled.structured_content["cells"]
    assert [c["supersedes"] for c in cells] == [OLD, None, None, None]


@pytest.mark.anyio
async def test_supersedes_through_the_mcp_tool_against_a_real_operator(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        holder = holder_create(data)
        cfg = ClientConfig(endpoint_url=url, auth_header=f"Bearer {holder['token']}")
        async with mcp.Client(build_mcp(OperatorClient(cfg)), raise_exceptions=True) as agent:
            old = await agent.call_tool("saihm_remember", {"content": "Priya lives in Leeds"})
            old_id = old.structured_content["cellId"]
            new = await agent.call_tool(
                "saihm_remember", {"content": "Priya moved to York", "supersedes": old_id}
            )
            recalled = await agent.call_tool("saihm_recall", {"query": "Priya"})
            wrong = await agent.call_tool(
                "saihm_remember", {"content": "x", "supersedes": "not a cell id"}
            )
    assert new.structured_content["status"] == "stored"
    new_id = new.structured_content["cellId"]
    cells = recalled.structured_content["cells"]
    assert [(c["cellId"], c["plaintext"]) for c in cells] == [(new_id, "Priya moved to York")]
    assert "Leeds" not in text_of(recalled)
    # The operator refuses a supersedes that is not a cellId; the report says it was not stored.
    assert wrong.is_error and wrong.structured_content["status"] == "failed"
