"""End to end: the ``saihm-mcp`` console script over stdio against the real ``saihm serve``.

Skeleton: skipped until ``saihm.http`` offers an app factory (``create_app``). To finish it,
build the real app with its store and operator, issue a holder credential, and pass the
endpoint and credential through ``stdio_server_parameters``.
"""

from __future__ import annotations

import importlib

import mcp
import pytest
from aiohttp import web

from tests.mcp.fake_operator import stdio_server_parameters


def _app_factory():  # -> Callable[..., aiohttp.web.Application] | None
    http = importlib.import_module("saihm.http")
    return getattr(http, "create_app", None)


@pytest.mark.anyio
async def test_remember_recall_forget_against_the_real_operator() -> None:
    create_app = _app_factory()
    if create_app is None:
        pytest.skip("saihm.http has no app factory yet")
    app = create_app()  # TODO: pass the real store/operator config once it exists.
    credential = "Bearer TODO"  # TODO: issue a holder credential from the operator.

    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        params = stdio_server_parameters(
            {"SAIHM_ENDPOINT_URL": f"http://127.0.0.1:{port}/", "SAIHM_AUTH_HEADER": credential}
        )
        async with mcp.Client(params) as client:
            stored = await client.call_tool("saihm_remember", {"content": "e2e memory"})
            cell_id = stored.structured_content["cellId"]
            recalled = await client.call_tool("saihm_recall", {"query": "e2e"})
            forgotten = await client.call_tool("saihm_forget", {"id": cell_id})
    finally:
        await runner.cleanup()
    assert stored.structured_content["status"] == "stored"
    assert [c["cellId"] for c in recalled.structured_content["cells"]] == [cell_id]
    assert forgotten.structured_content["status"] == "erased"
