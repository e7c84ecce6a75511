"""Certificate validation, the https-only rule and credential hygiene.

saihm-protocol "Transport requirements" and "Credential handling": no userinfo, query,
fragment, unparsable endpoint or Authorization value in any tool output or error text.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from saihm.mcp.config import (
    ConfigError,
    check_auth_header,
    load_config,
    redact_endpoint,
    validate_endpoint,
)
from tests.mcp.fake_operator import (
    OWN_ID,
    SECRET,
    FakeOperator,
    config,
    everything_printed,
    json_reply,
    run_tool,
    serve_operator,
    text_of,
)


def _server_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    return context


@pytest.mark.anyio
async def test_untrusted_certificate_fails_and_sends_nothing() -> None:
    fake = FakeOperator(routes={"saihm_status": json_reply({"agentIdHashHex": OWN_ID})})
    async with serve_operator(fake, _server_context(trustme.CA())) as url:
        result = await run_tool(config(url), "saihm_status")
    assert result.structured_content["status"] == "not_sent"
    assert "certificate" in text_of(result)
    assert fake.requests == []


@pytest.mark.anyio
async def test_certificate_from_another_ca_than_saihm_ca_file_fails(tmp_path: Path) -> None:
    trusted, other = trustme.CA(), trustme.CA()
    trusted.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    fake = FakeOperator(routes={"saihm_status": json_reply({"agentIdHashHex": OWN_ID})})
    async with serve_operator(fake, _server_context(other)) as url:
        result = await run_tool(config(url, ca_file=str(tmp_path / "ca.pem")), "saihm_status")
    assert result.structured_content["status"] == "not_sent"
    assert fake.requests == []


@pytest.mark.anyio
async def test_certificate_trusted_through_saihm_ca_file_works(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    env = {"SAIHM_ENDPOINT_URL": "unused", "SAIHM_CA_FILE": str(tmp_path / "ca.pem")}
    assert load_config(env).ca_file == str(tmp_path / "ca.pem")
    fake = FakeOperator(routes={"saihm_status": json_reply({"agentIdHashHex": OWN_ID})})
    async with serve_operator(fake, _server_context(ca)) as url:
        assert url.startswith("https://")
        result = await run_tool(config(url, ca_file=str(tmp_path / "ca.pem")), "saihm_status")
    assert result.structured_content["agentIdHashHex"] == OWN_ID


@pytest.mark.anyio
async def test_unloadable_ca_file_sends_nothing(tmp_path: Path) -> None:
    (tmp_path / "bad.pem").write_text("not a certificate")
    fake = FakeOperator()
    async with serve_operator(fake) as url:
        result = await run_tool(config(url, ca_file=str(tmp_path / "bad.pem")), "saihm_status")
    assert result.structured_content["status"] == "not_sent"
    assert fake.requests == []


# https only, except http to 127.0.0.1 or localhost.
@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/saihm",
        "http://localhost.example.com/",
        "http://127.0.0.2/",
        "http://[::1]/",
        "ftp://example.com/",
        "example.com",
        "//example.com/x",
        "https:///x",
    ],
)
def test_endpoint_that_is_not_https_is_refused(url: str) -> None:
    with pytest.raises(ConfigError):
        validate_endpoint(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/saihm",
        "http://127.0.0.1:8080/x",
        "http://localhost/",
        "HTTPS://EXAMPLE.com",
    ],
)
def test_https_and_local_http_are_allowed(url: str) -> None:
    assert validate_endpoint(url)


@pytest.mark.anyio
async def test_http_example_com_is_refused_before_any_connection() -> None:
    result = await run_tool(config("http://example.com/saihm"), "saihm_remember", {"content": "x"})
    assert result.structured_content["status"] == "not_sent"
    assert "not https" in text_of(result)


@pytest.mark.anyio
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_http_to_local_hosts_is_allowed(host: str) -> None:
    fake = FakeOperator(routes={"saihm_status": json_reply({"agentIdHashHex": OWN_ID})})
    async with serve_operator(fake) as url:
        result = await run_tool(config(url.replace("127.0.0.1", host)), "saihm_status")
    assert result.structured_content["status"] == "ok"


def test_redaction_keeps_only_scheme_host_port_path() -> None:
    url = f"https://user:{SECRET}@op.example:8443/v1/saihm?key={SECRET}#frag-{SECRET}"
    assert redact_endpoint(url) == "https://op.example:8443/v1/saihm"
    assert redact_endpoint("https://op.example") == "https://op.example/"
    assert redact_endpoint(f"ht tp://{SECRET}") == "<unparsable endpoint>"
    assert redact_endpoint(None) == "<endpoint not set>"


def test_fragment_is_not_sent() -> None:
    assert validate_endpoint("https://op.example/x?q=1#frag") == "https://op.example/x?q=1"


CREDENTIAL_ENDPOINTS = [
    f"https://user:{SECRET}@127.0.0.1:1/saihm",
    f"http://127.0.0.1:1/saihm?token={SECRET}",
    f"http://127.0.0.1:1/saihm#{SECRET}",
    f"http://127.0.0.1:1/saihm?token={SECRET}#{SECRET}",
    f"https://example.com:99999/?t={SECRET}",
    f"https://exa mple.com/{SECRET}",
    f"http://[{SECRET}/",
    f"http://example.com/?t={SECRET}",
    f"{SECRET}",
]


@pytest.mark.anyio
@pytest.mark.parametrize("url", CREDENTIAL_ENDPOINTS)
async def test_endpoint_secrets_never_appear_in_any_tool_output(url: str) -> None:
    for tool, args in [("saihm_status", {}), ("saihm_remember", {"content": "x"})]:
        result = await run_tool(config(url), tool, args)
        assert SECRET not in everything_printed(result)
        assert result.is_error


@pytest.mark.anyio
async def test_query_secret_not_printed_when_the_http_library_fails() -> None:
    fake = FakeOperator()
    fake.routes["saihm_status"] = fake.stall()
    async with serve_operator(fake) as url:
        results = [
            await run_tool(
                config(f"{url}?token={SECRET}#{SECRET}", timeout_seconds=0.5), "saihm_status"
            ),
        ]
    results.append(await run_tool(config(f"{url}?token={SECRET}"), "saihm_status"))  # refused
    for result in results:
        assert SECRET not in everything_printed(result)
        assert "127.0.0.1" in text_of(result)


@pytest.mark.anyio
@pytest.mark.parametrize("bad", ["\r\n", "\n", "\r", "\x00", "\x7f", "é"])
async def test_authorization_value_with_cr_lf_nul_is_refused_unquoted(bad: str) -> None:
    fake = FakeOperator(routes={"saihm_status": json_reply({"agentIdHashHex": OWN_ID})})
    async with serve_operator(fake) as url:
        result = await run_tool(
            config(url, auth_header=f"Bearer {SECRET}{bad}X-Evil: 1"), "saihm_status"
        )
    assert fake.requests == []
    assert result.structured_content["status"] == "not_sent"
    assert SECRET not in everything_printed(result)
    assert "SAIHM_AUTH_HEADER" in text_of(result)


def test_authorization_check_never_quotes_the_value() -> None:
    with pytest.raises(ConfigError) as info:
        check_auth_header(f"Bearer {SECRET}\n")
    assert SECRET not in str(info.value)
    assert check_auth_header(f"Bearer {SECRET}") == f"Bearer {SECRET}"


def test_config_repr_hides_endpoint_and_credential() -> None:
    assert SECRET not in repr(config(f"https://x/?t={SECRET}"))


def test_timeout_defaults_to_30_seconds_and_rejects_garbage() -> None:
    assert load_config({}).timeout_seconds == 30.0
    assert load_config({"SAIHM_TIMEOUT_SECONDS": "0.5"}).timeout_seconds == 0.5
    for bad in ["abc", "0", "-1", "nan", "inf"]:
        with pytest.raises(ConfigError):
            load_config({"SAIHM_TIMEOUT_SECONDS": bad})


@pytest.mark.anyio
async def test_missing_endpoint_or_credential_is_reported_not_sent() -> None:
    result = await run_tool(config(None), "saihm_status")
    assert "SAIHM_ENDPOINT_URL is not set" in text_of(result)
    result = await run_tool(config("https://example.com/", auth_header=None), "saihm_status")
    assert "SAIHM_AUTH_HEADER is not set" in text_of(result)
