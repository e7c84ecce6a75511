"""The client library's transport rules against a hostile fake operator and real TLS
(saihm-protocol "Transport requirements", "Credential handling")."""

from __future__ import annotations

import hashlib
import ssl
from pathlib import Path

import pytest
import trustme
from hypothesis import given
from hypothesis import strategies as st

from saihm.client import AsyncClient, Client, ClientError
from tests.mcp.fake_operator import (
    CELL_ID,
    MIB,
    OWN_ID,
    SECRET,
    FakeOperator,
    chunked_reply,
    json_reply,
    raw_reply,
    redirect_reply,
    serve_operator,
)

AUTH = f"Bearer {SECRET}"


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "http://10.0.0.1:8080/",
        "ftp://127.0.0.1/",
        "https://user:pw@example.com/",
        "not a url",
        "",
    ],
)
def test_refused_endpoints_fail_before_any_connection_and_are_not_quoted(url: str) -> None:
    with pytest.raises(ClientError) as caught:
        Client(url, AUTH)
    assert caught.value.kind == "config" and caught.value.outcome == "not_sent"
    assert "pw" not in str(caught.value) and "not a url" not in str(caught.value)


@pytest.mark.parametrize("auth", ["Bearer a\r\nX-Evil: 1", "Bearer \x00zz", ""])
def test_refused_auth_header_is_never_quoted(auth: str) -> None:
    with pytest.raises(ClientError) as caught:
        AsyncClient("https://example.com/", auth)
    assert "Evil" not in str(caught.value) and "zz" not in str(caught.value)


@given(tail=st.text(min_size=4, max_size=30))
def test_no_configuration_error_ever_quotes_a_secret(tail: str) -> None:
    """Whatever the secret holds (line breaks, NUL, non-ASCII), no error text carries it."""
    secret = "Zq9" + tail
    for endpoint, auth in (
        (f"https://{secret}@example.com/", "Bearer x"),
        (f"https://u:{secret}@example.com/", "Bearer x"),
        (f"http://example.com/?token={secret}", "Bearer x"),
        (f"https://example.com/#{secret}", "Bearer\n" + secret),
        (secret, "Bearer x"),
    ):
        try:
            AsyncClient(endpoint, auth)
        except ClientError as err:
            assert secret not in str(err) and secret not in repr(err)


async def test_localhost_http_is_allowed_and_the_request_is_the_binding() -> None:
    fake = FakeOperator(routes={"saihm_remember": json_reply({"cellId": CELL_ID})})
    async with serve_operator(fake) as url:
        stored = await AsyncClient(url, AUTH).remember("hello", namespace="notes")
    assert stored.cell_id == CELL_ID
    [request] = fake.requests
    assert request["body"] == {
        "method": "saihm_remember",
        "params": {"content": "hello", "namespace": "notes"},
    }
    assert request["headers"]["Authorization"] == AUTH


@pytest.mark.parametrize("status", [301, 307, 308])
async def test_redirect_is_a_failure_and_never_followed(status: int) -> None:
    target = FakeOperator(default=json_reply({"cellId": CELL_ID}))
    async with serve_operator(target) as target_url:
        fake = FakeOperator(routes={"saihm_remember": redirect_reply(status, target_url)})
        async with serve_operator(fake) as url:
            with pytest.raises(ClientError) as caught:
                await AsyncClient(url, AUTH).remember("secret memory")
    assert target.requests == []
    assert (caught.value.kind, caught.value.http_status) == ("redirect", status)
    assert target_url not in str(caught.value)


async def test_timeout_says_the_outcome_is_unknown() -> None:
    fake = FakeOperator()
    fake.routes["saihm_forget"] = fake.stall()
    async with serve_operator(fake) as url:
        with pytest.raises(ClientError) as caught:
            await AsyncClient(url, AUTH, timeout=0.3).forget(CELL_ID)
    assert caught.value.kind == "timeout" and caught.value.outcome == "unknown"
    assert "may or may not have acted" in str(caught.value)


async def test_chunked_response_is_bounded_while_reading() -> None:
    fake = FakeOperator(routes={"saihm_recall": chunked_reply(3 * MIB)})
    fake.routes["saihm_status"] = json_reply({"agentIdHashHex": OWN_ID})
    async with serve_operator(fake) as url:
        with pytest.raises(ClientError) as caught:
            await AsyncClient(url, AUTH, max_response_bytes=2 * MIB).recall("x")
    assert caught.value.kind == "too_large"


async def test_2xx_non_json_is_a_probable_intermediary() -> None:
    fake = FakeOperator(routes={"saihm_status": raw_reply(b"<html>Portal\x1b[31m</html>")})
    async with serve_operator(fake) as url:
        with pytest.raises(ClientError) as caught:
            await AsyncClient(url, AUTH).status()
    assert caught.value.kind == "intermediary"
    assert "\x1b" not in str(caught.value)


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("saihm_remember", {"cellId": "has space"}),
        ("saihm_remember", ["not", "an", "object"]),
        ("saihm_status", {"custody": "custodial"}),
        ("saihm_forget", {"success": "yes"}),
        ("saihm_forget", {"success": True, "cellId": "ee" * 32}),
        ("saihm_revoke_share", {"revoked": False}),
    ],
)
async def test_malformed_results_are_refused_not_reported(method: str, body: object) -> None:
    fake = FakeOperator(routes={method: json_reply(body)})
    async with serve_operator(fake) as url:
        client = AsyncClient(url, AUTH)
        call = {
            "saihm_remember": lambda: client.remember("x"),
            "saihm_status": client.status,
            "saihm_forget": lambda: client.forget(CELL_ID),
            "saihm_revoke_share": lambda: client.revoke_share("c" * 64),
        }[method]
        with pytest.raises(ClientError) as caught:
            await call()
    assert caught.value.kind == "malformed"


async def test_protocol_numbers_and_booleans_in_either_form() -> None:
    fake = FakeOperator(
        routes={"saihm_forget": json_reply({"success": "1", "cellId": CELL_ID, "epoch": "17"})}
    )
    async with serve_operator(fake) as url:
        result = await AsyncClient(url, AUTH).forget(CELL_ID)
    assert result.success is True and result.epoch == 17


async def test_recall_marks_cells_of_other_holders_and_unknown_owners() -> None:
    cells = [
        {"cellId": "a" * 64, "plaintext": "mine", "holderIdHex": OWN_ID.upper()},
        {"cellId": "b" * 64, "plaintext": "theirs", "holderIdHex": "cd" * 32},
        {"cellId": "c" * 64, "plaintext": "no owner"},
    ]
    fake = FakeOperator(
        routes={
            "saihm_status": json_reply({"agentIdHashHex": OWN_ID}),
            "saihm_recall": json_reply(cells),
        }
    )
    async with serve_operator(fake) as url:
        got = await AsyncClient(url, AUTH).recall()
    assert [c.shared_by_other_holder for c in got] == [False, True, True]
    assert fake.methods == ["saihm_status", "saihm_recall"]


# -- TLS ---------------------------------------------------------------------------------------


def _server(ca: trustme.CA) -> tuple[ssl.SSLContext, bytes]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    leaf.configure_cert(context)
    return context, ssl.PEM_cert_to_DER_cert(leaf.cert_chain_pems[0].bytes().decode())


async def test_tls_through_a_ca_file_and_a_matching_pin(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    context, der = _server(ca)
    pin = ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
    fake = FakeOperator(routes={"saihm_status": json_reply({"agentIdHashHex": OWN_ID})})
    async with serve_operator(fake, context) as url:
        plain = await AsyncClient(url, AUTH, ca_file=str(tmp_path / "ca.pem")).status()
        pinned = await AsyncClient(
            url, AUTH, ca_file=str(tmp_path / "ca.pem"), tls_pin_sha256=pin
        ).status()
    assert plain.agent_id_hash_hex == pinned.agent_id_hash_hex == OWN_ID


async def test_tls_pin_mismatch_sends_nothing(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    context, _ = _server(ca)
    fake = FakeOperator(routes={"saihm_remember": json_reply({"cellId": CELL_ID})})
    async with serve_operator(fake, context) as url:
        with pytest.raises(ClientError) as caught:
            await AsyncClient(
                url, AUTH, ca_file=str(tmp_path / "ca.pem"), tls_pin_sha256="00" * 32
            ).remember("secret memory")
    assert caught.value.kind == "not_sent" and "pinned" in str(caught.value)
    assert fake.requests == []


async def test_a_matching_pin_does_not_switch_off_certificate_validation(tmp_path: Path) -> None:
    """The pin is checked in addition to the chain: an untrusted certificate still fails."""
    context, der = _server(trustme.CA())
    pin = hashlib.sha256(der).hexdigest()
    fake = FakeOperator(routes={"saihm_remember": json_reply({"cellId": CELL_ID})})
    async with serve_operator(fake, context) as url:
        with pytest.raises(ClientError) as caught:
            await AsyncClient(url, AUTH, tls_pin_sha256=pin).remember("secret memory")
    assert caught.value.kind == "not_sent" and "certificate" in str(caught.value)
    assert fake.requests == []


@pytest.mark.parametrize("pin", ["xyz", "00" * 31, "sha1/" + "00" * 32])
def test_unusable_pin_is_a_configuration_error(pin: str) -> None:
    with pytest.raises(ClientError) as caught:
        Client("https://example.com/", AUTH, tls_pin_sha256=pin)
    assert caught.value.kind == "config"


def test_a_pin_needs_https() -> None:
    with pytest.raises(ClientError):
        Client("http://127.0.0.1:1/", AUTH, tls_pin_sha256="00" * 32)
