"""The ``saihm-mcp`` console script over stdio, against the fake operator."""

from __future__ import annotations

import mcp
import pytest

from tests.mcp.fake_operator import (
    OWN_ID,
    SECRET,
    FakeOperator,
    json_reply,
    serve_operator,
    stdio_server_parameters,
)


@pytest.mark.anyio
async def test_console_script_serves_the_tools_over_stdio() -> None:
    fake = FakeOperator(routes={"saihm_status": json_reply({"agentIdHashHex": OWN_ID})})
    async with serve_operator(fake) as url:
        params = stdio_server_parameters(
            {"SAIHM_ENDPOINT_URL": url, "SAIHM_AUTH_HEADER": f"Bearer {SECRET}"}
        )
        async with mcp.Client(params) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("saihm_status", {})
    assert len(names) == 8
    assert result.structured_content["agentIdHashHex"] == OWN_ID
    assert fake.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
