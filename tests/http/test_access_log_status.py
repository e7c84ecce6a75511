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
