"""``saihm.client.Admin`` / ``AsyncAdmin`` before anything is sent: endpoint and credential
checks that never quote the credential, and arguments refused without a request. The calls
themselves run against a real ``saihm authority serve`` in tests/cli/test_authority_service.py.
"""

from __future__ import annotations

import asyncio

import pytest

from saihm.client import Admin, AsyncAdmin, ClientError

SECRET = "saihm-admin-s3cret-value-that-must-never-show"


def _refused(call) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://example.com/",  # plain http off the loopback
        "ftp://127.0.0.1/",
        "http://user:pw@127.0.0.1:8090/",
        "http://127.0.0.1:8090/?key=1",
        "",
    ],
)
def test_an_unusable_endpoint_is_refused_before_any_connection(endpoint: str) -> None:
    err = _refused(lambda: Admin(endpoint, SECRET))
    assert err.kind == "config" and err.outcome == "not_sent"
    assert SECRET not in str(err) and "pw" not in str(err)


@pytest.mark.parametrize("credential", ["", "Bearer ", f"{SECRET}\r\nX-Evil: 1", f"{SECRET}\x00"])
def test_an_unusable_credential_is_refused_and_never_quoted(credential: str) -> None:
    err = _refused(lambda: Admin("http://127.0.0.1:8090/", credential))
    assert err.kind == "config" and SECRET not in str(err) and SECRET not in repr(err)


def test_the_credential_is_not_in_the_repr() -> None:
    admin = Admin("http://127.0.0.1:8090/", SECRET)
    try:
        assert SECRET not in repr(admin) and "127.0.0.1:8090" in repr(admin)
    finally:
        admin.close()
    assert SECRET not in repr(AsyncAdmin("http://127.0.0.1:8090/", SECRET))


@pytest.mark.parametrize("ttl", [0, -5, True, 1.5, "60"])
def test_a_bad_ttl_is_refused_before_sending(ttl: object) -> None:
    # Port 9 (discard) is never contacted: the refusal comes first.
    admin = AsyncAdmin("http://127.0.0.1:9/", SECRET)
    err = _refused(lambda: asyncio.run(admin.create_holder(ttl=ttl)))  # type: ignore[arg-type]
    assert (err.kind, err.outcome) == ("refused", "not_sent")


def test_revoke_session_needs_exactly_one_of_session_and_token() -> None:
    admin = AsyncAdmin("http://127.0.0.1:9/", SECRET)
    for kwargs in ({}, {"session_id": "ab" * 32, "token_id": "cd" * 16}):
        err = _refused(lambda kwargs=kwargs: asyncio.run(admin.revoke_session("ab" * 32, **kwargs)))
        assert err.kind == "refused"


def test_an_unreachable_service_says_nothing_was_sent_and_not_the_credential() -> None:
    with Admin("http://127.0.0.1:9/", SECRET, timeout=5) as admin:
        err = _refused(admin.create_holder)
    assert err.outcome == "not_sent" and SECRET not in str(err)
