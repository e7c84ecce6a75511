"""The authority never issues a token the server cannot read (issue 11, Build 5).

docs/security.md: "the authority refuses to issue a token longer than ISSUABLE_TOKEN_CHARS
(the server's header-line limit less "Authorization: Bearer ")".
"""

from __future__ import annotations

import secrets

import pytest

from saihm.authority import ISSUABLE_TOKEN_CHARS, Authority, check_token_fits
from saihm.errors import MalformedInput
from saihm.events import CapabilityScope
from saihm.events.capability import HEADER_FIELD_MAX
from tests.support.cli import run_saihm
from tests.support.serve import holder_create


def _scope(count: int, width: int = 160) -> CapabilityScope:
    names = tuple(f"{i:04d}-" + "n" * (width - 5) for i in range(count))
    return CapabilityScope(sessions="all", namespaces=names, grant_id=bytes(32))


def test_the_issuable_length_fits_the_header_line():
    assert ISSUABLE_TOKEN_CHARS + len("Authorization: Bearer ") == HEADER_FIELD_MAX


def test_check_token_fits_measures_the_issued_token_exactly(tmp_path):
    authority = Authority.open(tmp_path / "a", create=True)
    holder, session = secrets.token_bytes(32), secrets.token_bytes(32)
    for count in (0, 1, 5, 20):
        scope = _scope(count, 40)
        cap = authority.issue(holder, session, scope, 3600, now=1_800_000_000)
        assert check_token_fits(holder, session, scope, cap.expires_at) == len(cap.to_token())


def test_a_token_over_the_limit_is_refused_with_a_clear_message(tmp_path):
    authority = Authority.open(tmp_path / "a", create=True)
    holder = secrets.token_bytes(32)
    with pytest.raises(MalformedInput) as refused:
        authority.issue(holder, None, _scope(50), 3600)
    assert refused.value.code == "token_too_long"
    assert str(ISSUABLE_TOKEN_CHARS) in str(refused.value)


def test_the_longest_scope_that_fits_is_issued(tmp_path):
    authority = Authority.open(tmp_path / "a", create=True)
    holder = secrets.token_bytes(32)
    count = 0
    while True:
        try:
            check_token_fits(holder, None, _scope(count + 1), 1_800_003_600)
        except MalformedInput:
            break
        count += 1
    token = authority.issue(holder, None, _scope(count), 3600, now=1_800_000_000).to_token()
    assert len(token) <= ISSUABLE_TOKEN_CHARS
    with pytest.raises(MalformedInput):
        authority.issue(holder, None, _scope(count + 1), 3600, now=1_800_000_000)


def test_cli_grant_with_fifty_namespaces_is_refused_and_logs_no_grant(tmp_path):
    from saihm.compose import initialise, open_operator
    from saihm.config import Config

    data = tmp_path / "data"
    config = Config.for_data(data)
    initialise(config)  # as `saihm serve` leaves it: only serve creates a data directory
    holder = holder_create(data)["holderId"]
    operator = open_operator(config, checkpointer=False)
    before = operator.store.size()
    operator.store.close()
    names = ",".join(f"project-{i:02d}-" + "x" * 150 for i in range(50))
    argv = ["--data", str(data), "--holder", holder, "--sessions", "all", "--namespaces"]
    done = run_saihm("grant", *argv, names, timeout=60)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("saihm: error: the token would be") and "Traceback" not in line
    assert done.stdout == ""
    operator = open_operator(config, checkpointer=False)
    try:
        assert operator.store.size() == before  # no GRANT receipt behind the refusal
    finally:
        operator.store.close()


def test_cli_grant_with_an_overlong_namespace_is_one_line(tmp_path):
    from saihm.compose import initialise
    from saihm.config import Config

    data = tmp_path / "data"
    initialise(Config.for_data(data))
    holder = holder_create(data)["holderId"]
    argv = ["--data", str(data), "--holder", holder, "--sessions", "all", "--namespaces"]
    done = run_saihm("grant", *argv, "n" * 300, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def _bearer(header: str | None) -> str:
    from aiohttp.test_utils import make_mocked_request

    from saihm.http.common import bearer_token

    headers = {} if header is None else {"Authorization": header}
    return bearer_token(make_mocked_request("POST", "/", headers=headers))


@pytest.mark.parametrize("space", [" ", "\t", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2028"])
def test_a_bearer_token_with_whitespace_inside_is_refused(space: str) -> None:
    """The Authorization header is ``Bearer <token>`` and a token has no whitespace in it (any
    character ``str.isspace`` calls whitespace); the token is taken as it is otherwise."""
    from saihm.errors import Unauthenticated

    token = "a" * 3000 + "b"
    assert _bearer(f"Bearer {token}") == token
    assert _bearer(f"bearer  {token} ") == token
    for header in (f"Bearer {token[:10]}{space}{token[10:]}", "Bearer ", "Basic abc", None):
        with pytest.raises(Unauthenticated):
            _bearer(header)
