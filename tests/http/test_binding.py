"""POST / : the protocol binding (saihm-protocol "HTTPS binding", "Request and response")."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest

from saihm.config import Config


async def test_remember_recall_forget_round_trip(client, holder, call):
    status, remembered = await call(client, holder, "saihm_remember", {"content": "tea, no sugar"})
    assert status == 200
    cell_id = remembered["cellId"]
    assert len(cell_id) == 64 and cell_id == cell_id.lower()
    status, recalled = await call(client, holder, "saihm_recall", {"query": "tea"})
    assert status == 200 and isinstance(recalled, list)
    assert [c["plaintext"] for c in recalled] == ["tea, no sugar"]
    status, forgotten = await call(client, holder, "saihm_forget", {"id": cell_id})
    assert status == 200 and forgotten["success"] is True
    assert forgotten["cellId"] == cell_id
    status, recalled = await call(client, holder, "saihm_recall", {})
    assert (status, recalled) == (200, [])


async def test_result_has_no_outer_envelope_and_large_numbers_are_strings(client, holder, call):
    status, result = await call(client, holder, "saihm_remember", {"content": "x"})
    assert status == 200
    assert "result" not in result and "error" not in result
    assert isinstance(result["epoch"], str) and result["epoch"].isdigit()


async def test_status(client, holder, call):
    status, result = await call(client, holder, "saihm_status")
    assert status == 200 and isinstance(result, dict)


async def test_extension_methods_are_served(client, holder, operator, call):
    status, record = await call(client, holder, "saihm_record", {"content": "hi", "kind": "said"})
    assert status == 200 and len(record["cellId"]) == 64
    status, result = await call(
        client, holder, "saihm_forget_session", {"sessionId": holder.session_id.hex()}
    )
    assert status == 200, result
    status, result = await call(client, holder, "saihm_accept_contract", {"contractId": "ab" * 32})
    assert 400 <= status < 500 and isinstance(result["error"], str)


async def test_unknown_method_answers_a_failure_status(client, holder, operator, call):
    size = operator.store.size()
    status, body = await call(client, holder, "saihm_teleport")
    assert status == 404 and body == {"error": "unknown_method"}
    assert operator.store.size() == size


@pytest.fixture
def ungoverned(tmp_path):
    from saihm.compose import initialise, open_operator

    config = Config.for_data(tmp_path / "ungoverned", governance=False)
    authority = initialise(config)
    operator = open_operator(config)
    yield operator, authority
    operator.store.close()


async def test_a_disabled_tool_answers_a_failure_status(
    aiohttp_client, ungoverned, call, make_holder
):
    """ "An operator that does not enable a tool (for example, governance) MUST answer that
    tool with a failure status." """
    from saihm.http.app import create_app

    operator, authority = ungoverned
    holder = make_holder(operator, authority)
    client = await aiohttp_client(create_app(operator))
    size = operator.store.size()
    status, body = await call(
        client, holder, "saihm_governance_propose", {"scope": "protocol_upgrade"}
    )
    assert status >= 400 and body == {"error": "governance_disabled"}
    assert operator.store.size() == size


# -- authentication ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Bearer ", "Basic abc", "bearer", "Bearer a b", "Token x"],
)
async def test_missing_or_malformed_authorization_is_unauthenticated(client, operator, header):
    size = operator.store.size()
    headers = {} if header is None else {"Authorization": header}
    body = {"method": "saihm_remember", "params": {"content": "x"}}
    async with client.post("/", json=body, headers=headers) as resp:
        assert resp.status == 401
        assert await resp.json() == {"error": "unauthenticated"}
    assert operator.store.size() == size


def _flip(token: str, at: int) -> str:
    c = token[at]
    return token[:at] + ("A" if c != "A" else "B") + token[at + 1 :]


async def test_altered_token_is_unauthenticated(client, holder, operator):
    size = operator.store.size()
    for at in (0, len(holder.token) // 2, len(holder.token) - 2):
        altered = {"Authorization": f"Bearer {_flip(holder.token, at)}"}
        body = {"method": "saihm_remember", "params": {"content": "x"}}
        async with client.post("/", json=body, headers=altered) as resp:
            assert resp.status == 401
            assert await resp.json() == {"error": "unauthenticated"}
    assert operator.store.size() == size


async def test_expired_token_is_unauthenticated(client, operator, authority, call, make_holder):
    old = make_holder(operator, authority, now=int(time.time()) - 7200)
    size = operator.store.size()
    status, body = await call(client, old, "saihm_remember", {"content": "x"})
    assert (status, body) == (401, {"error": "unauthenticated"})
    assert operator.store.size() == size


async def test_token_of_another_authority_is_unauthenticated(
    client, operator, tmp_path, call, make_holder
):
    from saihm.authority import Authority

    stranger = Authority.open(tmp_path / "stranger", create=True)
    forged = make_holder(operator, stranger)
    size = operator.store.size()
    status, body = await call(client, forged, "saihm_status")
    assert (status, body) == (401, {"error": "unauthenticated"})
    assert operator.store.size() == size


# -- bad input never changes state -------------------------------------------------------------

BAD_BODIES = [
    b"",
    b"{",
    b"not json",
    b"[]",
    b'"saihm_status"',
    b"null",
    b"{}",
    b'{"params":{}}',
    b'{"method":7,"params":{}}',
    b'{"method":null}',
    b'{"method":"saihm_remember","params":[]}',
    b'{"method":"saihm_remember","params":"content"}',
    b'{"method":"saihm_remember","params":{"content":"x"},"extra":1}',
    b'{"method":"saihm_remember","method":"saihm_status","params":{}}',
    b'{"method":"saihm_remember","params":{"content":NaN}}',
    b'{"method":"saihm_remember","params":{"content":"\xff\xfe"}}',
    b"[" * 100_000 + b"]" * 100_000,
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=range(len(BAD_BODIES)))
async def test_malformed_body_is_bad_request_and_stores_nothing(
    client, holder, operator, body, call
):
    size = operator.store.size()
    async with client.post("/", data=body, headers=holder.auth) as resp:
        assert resp.status == 400
        assert await resp.json() == {"error": "bad_request"}
    assert operator.store.size() == size
    status, _ = await call(client, holder, "saihm_status")
    assert status == 200  # the server keeps serving


@pytest.mark.parametrize(
    "params",
    [{"content": 7}, {"content": ["x"]}, {"content": None}, {"content": "x", "filter": "all"}, {}],
)
async def test_wrong_param_types_are_refused_and_store_nothing(
    client, holder, operator, params, call
):
    size = operator.store.size()
    status, body = await call(client, holder, "saihm_remember", params)
    assert status == 400 and isinstance(body["error"], str)
    assert operator.store.size() == size


async def test_empty_content_is_empty_content(client, holder, operator, call):
    size = operator.store.size()
    status, body = await call(client, holder, "saihm_remember", {"content": "  \n"})
    assert (status, body) == (400, {"error": "empty_content"})
    assert operator.store.size() == size


async def test_20_mib_body_is_too_large_and_stores_nothing(client, holder, operator, call):
    size = operator.store.size()
    body = json.dumps({"method": "saihm_remember", "params": {"content": "x" * (20 << 20)}})
    async with client.post("/", data=body, headers=holder.auth) as resp:
        assert resp.status == 413
        assert await resp.json() == {"error": "too_large"}
    assert operator.store.size() == size
    status, _ = await call(client, holder, "saihm_status")
    assert status == 200


async def test_chunked_body_over_the_bound_is_too_large(client, holder, operator):
    size = operator.store.size()
    sent = 0

    async def chunks():
        nonlocal sent
        yield b'{"method":"saihm_remember","params":{"content":"'
        for _ in range(20):
            sent += 1
            yield b"x" * (1 << 20)
        yield b'"}}'

    async with client.post("/", data=chunks(), headers=holder.auth) as resp:
        assert resp.status == 413
        assert await resp.json() == {"error": "too_large"}
    assert operator.store.size() == size


async def test_declared_oversize_body_is_refused_before_it_is_read(client, holder):
    """The answer arrives although none of the 20 MiB declared was sent: nothing was read."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        writer.write(
            b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {holder.token}\r\n".encode()
            + b"Content-Length: 20971520\r\n\r\n"
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 413")


async def test_max_body_is_configurable(aiohttp_client, operator, holder, call):
    from saihm.http.app import create_app

    client = await aiohttp_client(create_app(operator, client_max_size=64))
    status, body = await call(client, holder, "saihm_remember", {"content": "y" * 100})
    assert (status, body) == (413, {"error": "too_large"})
    status, _ = await call(client, holder, "saihm_status")
    assert status == 200


def _remember_body(size: int) -> bytes:
    """A saihm_remember call of exactly ``size`` bytes."""
    empty = json.dumps({"method": "saihm_remember", "params": {"content": ""}}).encode()
    body = json.dumps(
        {"method": "saihm_remember", "params": {"content": "z" * (size - len(empty))}}
    ).encode()
    assert len(body) == size
    return body


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_a_body_at_the_bound_is_accepted_and_one_byte_more_is_413(
    aiohttp_client, operator, holder, framing
):
    """The bound is inclusive: a body of exactly ``client_max_size`` bytes is served, one of a
    byte more is refused and stores nothing, whether its length is declared or chunked."""
    from saihm.http.app import create_app

    bound = 4096
    client = await aiohttp_client(create_app(operator, client_max_size=bound))

    async def post(body: bytes) -> tuple[int, object]:
        async def chunks():
            yield body[: len(body) // 2]
            yield body[len(body) // 2 :]

        data = body if framing == "content-length" else chunks()
        async with client.post("/", data=data, headers=holder.auth) as resp:
            return resp.status, await resp.json()

    size = operator.store.size()
    status, answer = await post(_remember_body(bound))
    assert status == 200, answer
    assert operator.store.size() > size
    size = operator.store.size()
    assert await post(_remember_body(bound + 1)) == (413, {"error": "too_large"})
    assert operator.store.size() == size


# -- what never leaves ---------------------------------------------------------------------------


async def test_unexpected_exception_is_internal_without_details(
    client, holder, operator, monkeypatch, caplog
):
    # The operation itself fails (Operator.call moved to saihm.protocol.call, which now
    # calls the operation with the authenticated Access).
    def explode(access):
        raise RuntimeError("secret plaintext and " + holder.token)

    monkeypatch.setattr(operator.memory, "status", explode)
    with caplog.at_level(logging.INFO):
        async with client.post(
            "/", json={"method": "saihm_status", "params": {}}, headers=holder.auth
        ) as resp:
            assert resp.status == 500
            assert await resp.json() == {"error": "internal"}
    assert "RuntimeError" in caplog.text
    assert "secret plaintext" not in caplog.text and holder.token not in caplog.text


async def test_unknown_path_and_wrong_verb_are_json_errors(client):
    async with client.get("/nowhere") as resp:
        assert resp.status == 404 and await resp.json() == {"error": "not_found"}
    async with client.get("/") as resp:
        assert resp.status == 405 and await resp.json() == {"error": "method_not_allowed"}


async def test_access_log_is_one_json_line_without_secrets(client, holder, caplog, call):
    with caplog.at_level(logging.INFO, logger="saihm.http.access"):
        await call(client, holder, "saihm_remember", {"content": "my secret diary"})
        async with client.get("/log/v1/entries?start=0&end=1&secret=q") as resp:
            await resp.read()
    lines = [r.getMessage() for r in caplog.records if r.name == "saihm.http.access"]
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["method"] == "POST" and first["path"] == "/" and first["status"] == 200
    assert isinstance(first["ms"], float)
    assert second["path"] == "/log/v1/entries" and second["status"] == 400
    text = "\n".join(lines)
    for secret in (holder.token, "my secret diary", "secret=q", "Bearer"):
        assert secret not in text
