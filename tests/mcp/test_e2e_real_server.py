"""End to end: the ``saihm-mcp`` console script over stdio against the real ``saihm serve``.

An MCP host starts ``saihm-mcp`` with SAIHM_ENDPOINT_URL and SAIHM_AUTH_HEADER; here two
such clients (a holder and a grantee) drive a real operator subprocess through the whole
sharing lifecycle: remember, recall, share, accept (an extension method the grantee's host calls
over the binding, not an MCP tool), recall as grantee, revoke, forget.
"""

from __future__ import annotations

from pathlib import Path

import mcp
import pytest

from tests.mcp.fake_operator import stdio_server_parameters
from tests.support.serve import holder_create, post, serving


def _client(url: str, token: str) -> mcp.Client:
    env = {"SAIHM_ENDPOINT_URL": url, "SAIHM_AUTH_HEADER": f"Bearer {token}"}
    return mcp.Client(stdio_server_parameters(env))


@pytest.mark.anyio
async def test_sharing_lifecycle_through_the_console_script_against_saihm_serve(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        alice = holder_create(data)
        bob = holder_create(data)
        async with _client(url, alice["token"]) as owner, _client(url, bob["token"]) as grantee:
            stored = await owner.call_tool("saihm_remember", {"content": "e2e: the tea is green"})
            assert stored.structured_content["status"] == "stored"
            cell_id = stored.structured_content["cellId"]

            own = await owner.call_tool("saihm_recall", {"query": "tea"})
            assert own.structured_content["status"] == "ok"
            (cell,) = own.structured_content["cells"]
            assert cell["cellId"] == cell_id and cell["sharedByOtherHolder"] is False

            shared = await owner.call_tool(
                "saihm_share",
                {
                    "granteeIdHashesHex": [bob["holderId"]],
                    "shardIds": [cell_id],
                    "type": "temporary",
                    "scope": "read",
                },
            )
            assert shared.structured_content["status"] == "shared"
            contract_id = shared.structured_content["contractId"]

            before = await grantee.call_tool("saihm_recall", {})
            assert (before.structured_content["status"], before.structured_content["cells"]) == (
                "empty",
                [],
            )

            status, accepted = post(
                url, bob["token"], "saihm_accept_contract", {"contractId": contract_id}
            )
            assert status == 200 and accepted["accepted"] is True

            after = await grantee.call_tool("saihm_recall", {"query": "tea"})
            (seen,) = after.structured_content["cells"]
            assert seen["plaintext"] == "e2e: the tea is green"
            assert seen["sharedByOtherHolder"] is True
            assert "shared" in after.content[0].text.lower()

            revoked = await owner.call_tool("saihm_revoke_share", {"contractId": contract_id})
            assert revoked.structured_content["status"] == "revoked"
            gone = await grantee.call_tool("saihm_recall", {})
            assert (gone.structured_content["status"], gone.structured_content["cells"]) == (
                "empty",
                [],
            )

            forgotten = await owner.call_tool("saihm_forget", {"id": cell_id})
            assert forgotten.structured_content["status"] == "erased"
            again = await owner.call_tool("saihm_forget", {"id": cell_id})
            assert again.structured_content["status"] == "not_found_or_already_erased"
            empty = await owner.call_tool("saihm_recall", {})
            assert (empty.structured_content["status"], empty.structured_content["cells"]) == (
                "empty",
                [],
            )
