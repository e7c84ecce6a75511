"""End to end: the ``saihm-mcp`` console script over stdio against the real ``saihm serve``.

Skeleton: skipped until ``saihm.http`` offers an app factory. To finish it, start the real
app on 127.0.0.1 (``aiohttp.web.AppRunner`` + ``TCPSite``, as ``serve`` in fake_operator.py
does), issue a holder credential, and pass both through ``stdio_server_parameters``.
"""

from __future__ import annotations

import importlib

import mcp
import pytest

from tests.mcp.fake_operator import serve, stdio_server_parameters


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

    async def handler(request):  # pragma: no cover - replaced by the real app's router
        return await app._handle(request)

    async with serve(handler) as port:
        params = stdio_server_parameters(
            {"SAIHM_ENDPOINT_URL": f"http://127.0.0.1:{port}/", "SAIHM_AUTH_HEADER": credential}
        )
        async with mcp.Client(params) as client:
            stored = await client.call_tool("saihm_remember", {"content": "e2e memory"})
            cell_id = stored.structured_content["cellId"]
            recalled = await client.call_tool("saihm_recall", {"query": "e2e"})
            forgotten = await client.call_tool("saihm_forget", {"id": cell_id})
    assert stored.structured_content["status"] == "stored"
    assert [c["cellId"] for c in recalled.structured_content["cells"]] == [cell_id]
    assert forgotten.structured_content["status"] == "erased"
