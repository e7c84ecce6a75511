"""The access log tells the truth (issue #32 item 4): every line's ``status`` is the status the
client got, for every route the app registers (redirects and errors included), so a route
added later is covered without touching this test."""

from __future__ import annotations

import json
import logging
import re

import pytest
from aiohttp import web


def _requests(app: web.Application) -> list[tuple[str, str]]:
    """(method, path) for every registered route, a dynamic segment filled with a word, the
    same path with a method no route takes, and an unknown path."""
    sent = []
    for resource in app.router.resources():
        info = resource.get_info()
        path = info.get("path") or re.sub(r"\{[^}]*\}", "x", info.get("formatter", ""))
        for route in resource:
            methods = ["GET", "POST", "PUT"] if route.method == "*" else [route.method]
            sent.extend((method, path) for method in methods)
        sent.append(("PATCH", path))  # a method no route takes
    sent += [("GET", "/nowhere"), ("DELETE", "/"), ("GET", "/log/tile/../../etc")]
    return sorted(set(sent))


async def test_every_route_logs_the_status_the_client_got(client, holder, caplog) -> None:
    app = client.server.app
    sent = _requests(app)
    # The test covers what it says: redirects, successes and errors are all among them.
    assert {("GET", "/me"), ("GET", "/explorer"), ("POST", "/")} <= set(sent)
    got: dict[tuple[str, str], int] = {}
    with caplog.at_level(logging.INFO, logger="saihm.http.access"):
        for method, path in sent:
            caplog.clear()
            async with client.request(
                method, path, headers=holder.auth, data=b"{}", allow_redirects=False
            ) as resp:
                await resp.read()
                got[method, path] = resp.status
            lines = [r.getMessage() for r in caplog.records if r.name == "saihm.http.access"]
            assert len(lines) == 1, (method, path, lines)
            logged = json.loads(lines[0])
            assert (logged["method"], logged["status"]) == (method, resp.status), (path, logged)
    statuses = set(got.values())
    assert 301 in statuses and 200 in statuses and statuses & {400, 401, 404, 405}
    assert got["GET", "/me"] == got["GET", "/explorer"] == 301


@pytest.mark.parametrize("path", ["/me", "/explorer"])
async def test_a_redirect_is_logged_as_the_redirect(client, caplog, path: str) -> None:
    """The red team's finding: these answered 301 and were logged as ``"status":500``."""
    with caplog.at_level(logging.INFO, logger="saihm.http.access"):
        async with client.get(path, allow_redirects=False) as resp:
            assert resp.status == 301 and resp.headers["Location"] == path + "/"
    [line] = [r.getMessage() for r in caplog.records if r.name == "saihm.http.access"]
    assert json.loads(line)["status"] == 301


async def test_every_authority_route_logs_the_status_the_client_got(
    aiohttp_client, operator, authority, caplog
) -> None:
    """The same for ``saihm authority serve`` (its line: method, path, status, ms)."""
    import hashlib

    from saihm.services.authority import AuthorityService, create_authority_app

    credential = "saihm-admin-test"
    service = AuthorityService(
        operator, authority, hashlib.sha256(credential.encode()).digest(), 60
    )
    client = await aiohttp_client(create_authority_app(service))
    sent = _requests(client.server.app)
    assert ("POST", "/v1/sessions/revoke") in sent
    statuses = set()
    with caplog.at_level(logging.INFO, logger="saihm.authority"):
        for method, path in sent:
            for auth in ({}, {"Authorization": f"Bearer {credential}"}):
                caplog.clear()
                async with client.request(
                    method, path, headers=auth, data=b"{}", allow_redirects=False
                ) as resp:
                    await resp.read()
                lines = [
                    r.getMessage()
                    for r in caplog.records
                    if r.name == "saihm.authority" and r.getMessage().startswith(method + " ")
                ]
                assert len(lines) == 1, (method, path, lines)
                assert int(lines[0].split()[2]) == resp.status, (path, lines[0])
                statuses.add(resp.status)
    assert {200, 400, 401, 404, 405} <= statuses


async def test_answered_tells_the_status_the_client_got_and_reraises() -> None:
    """The one place the access logs and the request metrics learn a request's status
    (saihm.http.common.answered): a response's, an answered HTTPException's, 499 for a request
    cancelled before any answer, 500 for any other exception; what the handler raised still
    propagates, and ``seen`` hears of each request exactly once."""
    import asyncio

    from aiohttp.test_utils import make_mocked_request

    from saihm.http.common import CLIENT_GONE, answered

    async def ok(_request: web.Request) -> web.StreamResponse:
        return web.Response(status=204)

    def raising(err: BaseException):
        async def handler(_request: web.Request) -> web.StreamResponse:
            raise err

        return handler

    cases = [
        (ok, 204, None),
        (raising(web.HTTPFound("/elsewhere")), 302, web.HTTPFound),
        (raising(web.HTTPNotFound()), 404, web.HTTPNotFound),
        (raising(asyncio.CancelledError()), CLIENT_GONE, asyncio.CancelledError),
        (raising(RuntimeError("boom")), 500, RuntimeError),
    ]
    for handler, status, raised in cases:
        seen: list[tuple[int, float]] = []
        request = make_mocked_request("GET", "/x")
        if raised is None:
            response = await answered(request, handler, lambda s, t, into=seen: into.append((s, t)))
            assert response.status == status
        else:
            with pytest.raises(raised):
                await answered(request, handler, lambda s, t, into=seen: into.append((s, t)))
        assert [s for s, _t in seen] == [status] and seen[0][1] >= 0


async def test_every_witness_route_logs_the_status_the_client_got(
    aiohttp_client, tmp_path, capfd
) -> None:
    """The same for ``saihm witness serve`` (one JSON line per request on stderr)."""
    from saihm.services.witness import Witness, create_witness_app, load_or_create_key
    from saihm.witness.state import WitnessState

    state = WitnessState(tmp_path / "w")
    try:
        signer, _created = load_or_create_key(tmp_path / "witness.key", "witness.example/w")
        client = await aiohttp_client(create_witness_app(Witness(state, signer, [])))
        sent = _requests(client.server.app)
        assert ("POST", "/add-checkpoint") in sent
        statuses = set()
        for method, path in sent:
            capfd.readouterr()
            async with client.request(method, path, data=b"{}", allow_redirects=False) as resp:
                await resp.read()
            lines = [
                json.loads(x) for x in capfd.readouterr().err.splitlines() if x.startswith("{")
            ]
            assert len(lines) == 1, (method, path, lines)
            assert (lines[0]["method"], lines[0]["status"]) == (method, resp.status), path
            statuses.add(resp.status)
        assert {400, 404, 405} <= statuses
    finally:
        state.close()
