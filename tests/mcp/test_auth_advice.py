"""The MCP report for 401 and 403 names the likely cause and the command that fixes it,
without echoing any credential (issue 15, continuity). That the real operator's 401 body stays
the protocol's code is checked in tests/client/test_async_client.py."""

from __future__ import annotations

import pytest

from tests.mcp.fake_operator import (
    CELL_ID,
    SECRET,
    FakeOperator,
    config,
    everything_printed,
    json_reply,
    run_tool,
    serve_operator,
    text_of,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("saihm_status", {}),
        ("saihm_remember", {"content": "x"}),
        ("saihm_forget", {"id": CELL_ID}),
        ("saihm_governance_vote", {"proposalId": "p" * 64, "approve": True}),
    ],
)
async def test_401_names_expiry_and_the_renew_and_grant_commands(tool: str, args: dict) -> None:
    fake = FakeOperator(default=json_reply({"error": "unauthenticated"}, 401))
    async with serve_operator(fake) as url:
        result = await run_tool(config(url), tool, args)
    text = text_of(result)
    assert result.is_error and result.structured_content["errorCode"] == "unauthenticated"
    assert "expired" in text and "saihm session renew --data DIR" in text
    assert "saihm grant --data DIR --holder HOLDER --sessions all --ttl SECONDS" in text
    assert result.structured_content["advice"] in text
    assert SECRET not in everything_printed(result)


async def test_403_not_holder_names_the_session_scope_and_the_grant() -> None:
    fake = FakeOperator(routes={"saihm_forget": json_reply({"error": "not_holder"}, 403)})
    async with serve_operator(fake) as url:
        result = await run_tool(config(url), "saihm_forget", {"id": CELL_ID})
    text = text_of(result)
    assert "sees only its own session" in text and "--sessions all" in text
    assert SECRET not in everything_printed(result)


async def test_other_failures_carry_no_credential_advice() -> None:
    fake = FakeOperator(routes={"saihm_remember": json_reply({"error": "rate_limited"}, 429)})
    async with serve_operator(fake) as url:
        result = await run_tool(config(url), "saihm_remember", {"content": "x"})
    assert result.structured_content["advice"] is None
    assert "saihm grant" not in text_of(result)
