"""SAIHM_TLS_PIN_SHA256: saihm-mcp pins the server certificate in addition to validating it."""

from __future__ import annotations

import hashlib
import ssl
from pathlib import Path

import pytest
import trustme

from saihm.mcp.config import load_config
from tests.mcp.fake_operator import (
    OWN_ID,
    FakeOperator,
    config,
    json_reply,
    run_tool,
    serve_operator,
)

pytestmark = pytest.mark.anyio


def _server(ca: trustme.CA) -> tuple[ssl.SSLContext, str]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    leaf.configure_cert(context)
    der = ssl.PEM_cert_to_DER_cert(leaf.cert_chain_pems[0].bytes().decode())
    return context, hashlib.sha256(der).hexdigest()


async def test_matching_pin_works_and_a_mismatch_sends_nothing(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    context, pin = _server(ca)
    assert load_config({"SAIHM_TLS_PIN_SHA256": pin}).tls_pin_sha256 == pin
    fake = FakeOperator(routes={"saihm_status": json_reply({"agentIdHashHex": OWN_ID})})
    async with serve_operator(fake, context) as url:
        good = await run_tool(
            config(url, ca_file=str(tmp_path / "ca.pem"), tls_pin_sha256=pin), "saihm_status"
        )
        bad = await run_tool(
            config(url, ca_file=str(tmp_path / "ca.pem"), tls_pin_sha256="ab" * 32),
            "saihm_status",
        )
    assert good.structured_content["agentIdHashHex"] == OWN_ID
    assert bad.structured_content["status"] == "not_sent" and "pinned" in bad.content[0].text
    assert len(fake.requests) == 1


@pytest.mark.parametrize("pin", ["not-a-pin", "ab" * 31])
async def test_unusable_pin_is_reported_by_the_tool_and_nothing_is_sent(pin: str) -> None:
    fake = FakeOperator()
    async with serve_operator(fake) as url:
        https = url.replace("http://", "https://")
        result = await run_tool(config(https, tls_pin_sha256=pin), "saihm_status")
    assert result.structured_content["status"] == "not_sent"
    assert "SAIHM_TLS_PIN_SHA256" in result.content[0].text and pin not in result.content[0].text
    assert fake.requests == []
