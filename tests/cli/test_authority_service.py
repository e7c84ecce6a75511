"""``saihm authority serve`` and ``saihm.client.Admin`` (issue #25 items 1 and 2), with two real
processes: the authority service and the operator (``saihm serve``) on one data directory.

The Done-when sentence: "Creating a user, opening, renewing and revoking a session, and
granting cross-session recall work end to end over the authority service with
saihm.client.Admin, and the CLI's output is unchanged; the hidden-from-the-agent admin
credential never appears in logs or errors."
"""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from saihm.client import Admin, AsyncAdmin, Client, ClientError
from tests.support.serve import SAIHM, authority_serving, fetch, serving

MONTH = 30 * 86_400


@dataclass
class Both:
    """The operator at ``url``, the authority service at ``admin_url`` with ``credential``."""

    tmp: Path
    data: Path
    url: str
    admin_url: str
    credential: str

    def admin(self) -> Admin:
        return Admin(self.admin_url, self.credential)

    def raw(self, path: str, body: bytes, auth: str | None = None) -> tuple[int, dict]:
        """POST ``body`` to the service; (status, parsed JSON answer)."""
        headers = {"Content-Type": "application/json"}
        headers["Authorization"] = f"Bearer {self.credential}" if auth is None else auth
        status, raw = fetch(self.admin_url + path, data=body, headers=headers)
        return status, json.loads(raw)

    def logs(self) -> str:
        return "".join(
            (self.tmp / f"{name}.{ext}").read_text()
            for name in ("serve", "authority")
            for ext in ("out", "err")
        )

    def log_size(self) -> int:
        return _log(self.data)[0]


def _log(data: Path, start: int = 0) -> tuple[int, list]:
    """The log's size and its receipts from ``start``, read by a third process's store."""
    from saihm.compose import open_operator
    from saihm.config import Config
    from saihm.events.models import Receipt

    operator = open_operator(Config.for_data(data), checkpointer=False)
    try:
        size = operator.store.size()
        leaves = operator.store.leaves(start, size) if size > start else []
    finally:
        operator.store.close()
    return size, [Receipt.from_cbor(bytes(leaf)) for leaf in leaves]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Both]:
    tmp = tmp_path_factory.mktemp("authority")
    data = tmp / "data"
    with (
        serving(tmp, "--data", str(data), "--rate-limit", "0") as (_, url),
        authority_serving(tmp, data, tmp / "authority") as (_, admin_url, credential),
    ):
        yield Both(tmp, data, url, admin_url, credential)


def _refused(call) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value


def test_the_admin_credential_is_made_once_in_the_authority_directory_mode_0600(
    both: Both,
) -> None:
    path = both.tmp / "authority" / "admin.credential"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(both.credential) >= 32
    said = (both.tmp / "authority.out").read_text()
    assert f"admin credential created in {path}" in said and both.credential not in said


def test_user_session_renew_revoke_end_to_end_through_admin_and_the_operator(
    both: Both,
) -> None:
    """Create a user, open a session, remember and recall through the operator with it, renew
    it (same memory), revoke it: the operator then refuses its tokens, and renewing it is
    refused with nothing issued."""
    before = int(time.time())
    with both.admin() as admin:
        user = admin.create_holder()
        assert user.holder_id and user.session_id and user.token
        assert user.scope.sessions == "one" and user.scope.session_id == user.session_id
        assert before + MONTH <= user.expires_at <= int(time.time()) + MONTH
        assert user.expires_at_utc.endswith("Z") and user.expires.tzinfo is not None
        assert user.token not in repr(user)

        with Client(both.url, f"Bearer {user.token}") as agent:
            agent.remember("authority: the user likes oolong")
            assert [c.plaintext for c in agent.recall("oolong")] == [
                "authority: the user likes oolong"
            ]

        renewed = admin.renew_session(user.holder_id, user.session_id, ttl=600)
        assert renewed.session_id == user.session_id and renewed.token != user.token
        assert renewed.expires_at <= int(time.time()) + 600
        with Client(both.url, f"Bearer {renewed.token}") as agent:
            assert [c.plaintext for c in agent.recall("oolong")] == [
                "authority: the user likes oolong"
            ]

        other = admin.open_session(user.holder_id)
        assert other.session_id != user.session_id
        with Client(both.url, f"Bearer {other.token}") as agent:
            assert agent.recall("oolong") == []  # memory starts in one session only

        revoked = admin.revoke_session(user.holder_id, user.session_id)
        assert (revoked.revoked, revoked.changed) == (True, True)
        assert admin.revoke_session(user.holder_id, user.session_id).changed is False
        for token in (user.token, renewed.token):
            with Client(both.url, f"Bearer {token}") as agent:
                err = _refused(lambda agent=agent: agent.recall("oolong"))
                assert err.http_status == 401, err
        err = _refused(lambda: admin.renew_session(user.holder_id, user.session_id))
        assert (err.http_status, err.operator_code) == (409, "conflict")
        with Client(both.url, f"Bearer {other.token}") as agent:
            agent.remember("the other session still works")


def test_a_grant_recalls_across_sessions_until_revoked(both: Both) -> None:
    with both.admin() as admin:
        user = admin.create_holder()
        with Client(both.url, f"Bearer {user.token}") as agent:
            agent.remember("grant: work notes", namespace="work")
            agent.remember("grant: home notes", namespace="home")
        granted = admin.grant(user.holder_id, namespaces=["work"])
        assert granted.grant_id and granted.scope.sessions == "all"
        assert granted.scope.namespaces == ["work"] and granted.scope.grant_id == granted.grant_id
        # The recommended setup lasts a month without a --ttl (docs/authority.md).
        assert granted.expires_at >= int(time.time()) + MONTH - 60
        with Client(both.url, f"Bearer {granted.token}") as across:
            assert [c.plaintext for c in across.recall("notes")] == ["grant: work notes"]
        gone = admin.revoke_grant(granted.grant_id)
        assert (gone.revoked, gone.changed) == (True, True)
        with Client(both.url, f"Bearer {granted.token}") as across:
            assert _refused(lambda: across.recall("notes")).http_status == 401
        assert admin.revoke_grant(granted.grant_id).changed is False
        err = _refused(lambda: admin.revoke_grant("ab" * 32))
        assert (err.http_status, err.operator_code) == (404, "grant_not_found")
        err = _refused(lambda: admin.open_session("ab" * 32))
        assert (err.http_status, err.operator_code) == (404, "holder_not_found")


def test_the_running_service_sees_holders_the_commands_made_and_a_kek_rotation(
    both: Both,
) -> None:
    """The service keeps its store open while other processes write: a holder that ``saihm
    holder create`` made and a KEK that ``saihm kek rotate`` replaced (the holder seeds
    re-wrapped, the old KEK destroyed) are what its next call uses."""

    def cli(*argv: str) -> dict:
        done = subprocess.run(
            [SAIHM, *argv, "--data", str(both.data)], capture_output=True, text=True, check=True
        )
        return json.loads(done.stdout)

    with both.admin() as admin:
        made_here = admin.create_holder()
        made_there = cli("holder", "create")
        with Client(both.url, f"Bearer {made_there['token']}") as agent:
            agent.remember("rotation: written before the KEK changed")
        cli("kek", "rotate")
        for holder in (made_here.holder_id, made_there["holderId"]):
            granted = admin.grant(holder, ttl=300)
            assert granted.scope.grant_id == granted.grant_id
        with Client(both.url, f"Bearer {granted.token}") as across:
            assert [c.plaintext for c in across.recall("rotation")] == [
                "rotation: written before the KEK changed"
            ]


def test_async_admin_does_the_same(both: Both) -> None:
    async def run() -> tuple:
        async with AsyncAdmin(both.admin_url, both.credential) as admin:
            user = await admin.create_holder(ttl=120)
            opened = await admin.open_session(user.holder_id)
            granted = await admin.grant(user.holder_id, ttl=60)
            return user, opened, granted

    user, opened, granted = asyncio.run(run())
    assert user.expires_at <= int(time.time()) + 120
    assert opened.session_id != user.session_id and granted.expires_at <= int(time.time()) + 60


def test_the_service_logs_what_the_commands_log(both: Both) -> None:
    """Each call leaves in the log what its command leaves: KEY for a holder, nothing for
    opening or renewing a session, GRANT (with its namespaces) for a grant, UNGRANT for
    revoking a grant or a session."""

    def shape(receipts: list) -> list:
        return [
            (r.operation.name, type(r.detail).__name__, getattr(r.detail, "namespaces", None))
            for r in receipts
        ]

    start = both.log_size()
    with both.admin() as admin:
        user = admin.create_holder()
        admin.open_session(user.holder_id)
        admin.renew_session(user.holder_id, user.session_id)
        granted = admin.grant(user.holder_id, namespaces=["a", "b"], ttl=300)
        admin.revoke_grant(granted.grant_id)
        admin.revoke_session(user.holder_id, user.session_id)
    middle, by_service = _log(both.data, start)

    def cli(*argv: str) -> dict:
        words = 1 if argv[0] == "grant" and argv[1] != "revoke" else 2
        done = subprocess.run(
            [SAIHM, *argv[:words], "--data", str(both.data), *argv[words:]],
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(done.stdout)

    created = cli("holder", "create")
    holder = created["holderId"]
    cli("session", "open", "--holder", holder)
    cli("session", "renew", "--holder", holder, "--session", created["sessionId"])
    grant = cli("grant", "--holder", holder, "--sessions", "all", "--namespaces", "a,b")
    cli("grant", "revoke", grant["grantId"])
    cli("session", "revoke", "--holder", holder, created["sessionId"])
    _, by_cli = _log(both.data, middle)
    # Nothing else wrote meanwhile: no agent called the operator during these calls.
    assert [r.holder_id.hex() for r in by_service] == [user.holder_id] * 4
    assert shape(by_service) == shape(by_cli)
    assert [r.operation.name for r in by_service] == ["KEY", "GRANT", "UNGRANT", "UNGRANT"]
    assert by_service[2].subject_id.hex() == granted.grant_id


def _token_id(token: str) -> str:
    from saihm.events import Capability

    return Capability.from_token(token).token_id.hex()


def test_an_id_that_is_not_the_holders_is_404_and_changes_nothing(both: Both) -> None:
    """Issue #32 item 3: "A session (or grant) that does not belong to the named holder gets
    404 not_found, changes nothing and writes nothing; the same for renew." Revoking holder
    A's session or token under holder B's id would log an UNGRANT that matches nothing (the
    revocation is keyed by holder) while answering "revoked", and A's token would keep
    working."""
    with both.admin() as admin:
        a, b = admin.create_holder(), admin.create_holder()
        with Client(both.url, f"Bearer {a.token}") as agent:
            agent.remember("ownership: A wrote this")
        start = both.log_size()
        for wrong in (
            lambda: admin.revoke_session(b.holder_id, a.session_id),
            lambda: admin.revoke_session(b.holder_id, token_id=_token_id(a.token)),
            lambda: admin.revoke_session(a.holder_id, "cd" * 32),  # never minted
            lambda: admin.revoke_session(a.holder_id, token_id="cd" * 16),
            lambda: admin.renew_session(b.holder_id, a.session_id),
            lambda: admin.renew_session(a.holder_id, "cd" * 32),
        ):
            err = _refused(wrong)
            assert (err.http_status, err.operator_code) == (404, "not_found"), err
            assert "not_found" in str(err) and both.credential not in str(err)
        status, answer = both.raw(
            "v1/sessions/revoke",
            json.dumps({"holderId": b.holder_id, "sessionId": a.session_id}).encode(),
        )
        assert (status, answer) == (404, {"error": "not_found"})
        assert both.log_size() == start  # nothing written
        with Client(both.url, f"Bearer {a.token}") as agent:
            assert [c.plaintext for c in agent.recall("ownership")] == ["ownership: A wrote this"]
        start = both.log_size()  # the recall logged its RECALL receipts
        # The command line refuses the same, in one line, with nothing logged.
        argv = ["session", "revoke", "--data", str(both.data), "--holder", b.holder_id]
        done = subprocess.run(
            [SAIHM, *argv, a.session_id],
            capture_output=True,
            text=True,
        )
        assert done.returncode != 0 and done.stdout == "", done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert both.log_size() == start
        # The holder's own ids still revoke: one token, then the session.
        one = admin.revoke_session(a.holder_id, token_id=_token_id(a.token))
        assert (one.revoked, one.changed) == (True, True)
        with Client(both.url, f"Bearer {a.token}") as agent:
            assert _refused(lambda: agent.recall("ownership")).http_status == 401
        assert admin.revoke_session(a.holder_id, a.session_id).changed is True
        assert both.log_size() == start + 2


def test_a_session_minted_before_ids_were_bound_is_its_holders_once_it_wrote(
    both: Both,
) -> None:
    """A session id the authority did not bind to its holder (issued before it did) is known
    to be the holder's by what it wrote under that holder; under another holder it is 404."""
    import secrets

    from saihm.authority import Authority
    from saihm.events import CapabilityScope

    authority = Authority.open(both.tmp / "authority")
    with both.admin() as admin:
        a, b = admin.create_holder(), admin.create_holder()
        legacy = secrets.token_bytes(32)
        cap = authority.issue(bytes.fromhex(a.holder_id), legacy, CapabilityScope(), 600)
        with Client(both.url, f"Bearer {cap.to_token()}") as agent:
            agent.remember("legacy: written by an old session")
        err = _refused(lambda: admin.revoke_session(b.holder_id, legacy.hex()))
        assert (err.http_status, err.operator_code) == (404, "not_found")
        assert admin.renew_session(a.holder_id, legacy.hex()).session_id == legacy.hex()
        assert admin.revoke_session(a.holder_id, legacy.hex()).changed is True


def test_the_authority_binds_each_id_it_mints_to_its_holder(tmp_path: Path) -> None:
    from saihm.authority import Authority

    authority = Authority.open(tmp_path / "authority", create=True)
    other = Authority.open(tmp_path / "other", create=True)
    a, b = bytes(range(32)), bytes(32)
    for mint in (authority.session_id, authority.token_id):
        given = mint(a)
        assert authority.minted(a, given) and not authority.minted(b, given)
        assert not other.minted(a, given)  # another authority's key
        flipped = given[:-1] + bytes([given[-1] ^ 1])
        assert not authority.minted(a, flipped) and mint(a) != given
    assert not authority.minted(a, bytes(20))


def test_after_a_revoked_session_the_advice_names_commands_that_work(both: Both) -> None:
    """Issue #32 item 9: after ``Admin.revoke_session`` the client's 401 advice named only
    ``saihm session renew``, which refuses a revoked session. Each command the advice names is
    run as written: renewing is refused, as the advice now says, and opening a new session
    gives a token the operator accepts."""
    import re

    with both.admin() as admin:
        user = admin.create_holder()
        admin.revoke_session(user.holder_id, user.session_id)
    with Client(both.url, f"Bearer {user.token}") as agent:
        advice = _refused(lambda: agent.recall("anything")).advice
    assert advice is not None and "a revoked session cannot be renewed" in advice
    fill = {"DIR": str(both.data), "HOLDER": user.holder_id, "SESSION": user.session_id}
    fill["SECONDS"] = "60"
    ran = {}
    for command in re.findall(r"`(saihm [^`]+)`", advice):
        words = [fill.get(word, word) for word in command.split()[1:]]
        done = subprocess.run([SAIHM, *words], capture_output=True, text=True)
        ran[" ".join(w for w in words[:2] if not w.startswith("-"))] = done
    assert set(ran) == {"session renew", "session open", "grant"}
    assert ran["session renew"].returncode == 2 and "revoked" in ran["session renew"].stderr
    assert ran["grant"].returncode == 0
    opened = json.loads(ran["session open"].stdout)
    with Client(both.url, f"Bearer {opened['token']}") as agent:
        agent.remember("a new session after the revocation")


def test_a_wrong_credential_gets_401_and_no_token(both: Both) -> None:
    start = both.log_size()
    body = b"{}"
    for auth in (
        "",
        "Bearer",
        "Bearer wrong",
        f"Bearer {both.credential}x",
        f"Bearer {both.credential[:-1]}",
        f"Basic {both.credential}",
        both.credential,
    ):
        for path in ("v1/holders", "v1/grants", "v1/sessions/revoke"):
            status, answer = both.raw(path, body, auth=auth)
            assert (status, answer) == (401, {"error": "unauthenticated"}), (auth[:7], path)
    err = _refused(lambda: Admin(both.admin_url, "not-the-credential").create_holder())
    assert (err.http_status, err.operator_code) == (401, "unauthenticated")
    assert "not-the-credential" not in str(err) and "not-the-credential" not in repr(err)
    assert both.log_size() == start


HOLDER = "ab" * 32


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("v1/holders", b"not json"),
        ("v1/holders", b"[1, 2]"),
        ("v1/holders", b'"text"'),
        ("v1/holders", b'{"ttl": NaN}'),
        ("v1/holders", b'{"ttl": -1}'),
        ("v1/holders", b'{"ttl": 0}'),
        ("v1/holders", b'{"ttl": "600"}'),
        ("v1/holders", b'{"ttl": 1.5}'),
        ("v1/holders", b'{"ttl": true}'),
        ("v1/holders", b'{"ttl": 99999999999999999999999}'),
        ("v1/holders", b'{"admin": true}'),
        ("v1/holders", b"\xff\xfe{}"),
        ("v1/holders", b"[" * 30_000),
        ("v1/sessions", b"{}"),
        ("v1/sessions", b'{"holderId": "zz"}'),
        ("v1/sessions", b'{"holderId": "' + b"a" * 63 + b'"}'),
        ("v1/sessions", b'{"holderId": 7}'),
        ("v1/sessions", b'{"holderId": null}'),
        ("v1/sessions/renew", b'{"holderId": "' + HOLDER.encode() + b'"}'),
        ("v1/sessions/revoke", b'{"holderId": "' + HOLDER.encode() + b'"}'),
        (
            "v1/sessions/revoke",
            b'{"holderId": "%s", "sessionId": "%s", "tokenId": "%s"}'
            % (HOLDER.encode(), HOLDER.encode(), b"cd" * 16),
        ),
        ("v1/grants", b'{"holderId": "' + HOLDER.encode() + b'", "namespaces": []}'),
        # An empty namespace is bad_namespace (tests/http/test_namespaces.py).
        ("v1/grants", b'{"holderId": "' + HOLDER.encode() + b'", "namespaces": "a,b"}'),
        ("v1/grants", b'{"holderId": "' + HOLDER.encode() + b'", "sessions": "all"}'),
        ("v1/grants/revoke", b'{"grantId": ["x"]}'),
    ],
)
def test_hostile_bodies_get_a_400_error_code_change_nothing_and_issue_nothing(
    both: Both, path: str, body: bytes
) -> None:
    start = both.log_size()
    status, answer = both.raw(path, body)
    assert (status, answer) == (400, {"error": "bad_request"})
    assert both.log_size() == start


def test_an_oversize_body_is_413_and_unknown_paths_and_methods_are_json(both: Both) -> None:
    status, answer = both.raw("v1/holders", b'{"ttl": 60, "x": "' + b"a" * 100_000 + b'"}')
    assert (status, answer) == (413, {"error": "too_large"})
    status, raw = fetch(both.admin_url + "v1/holders")
    assert (status, json.loads(raw)) == (405, {"error": "method_not_allowed"})
    status, answer = both.raw("v1/tokens", b"{}")
    assert (status, answer) == (404, {"error": "not_found"})
    # A credential pasted into a path is not logged either (the last test looks).
    status, answer = both.raw("v1/" + both.credential, b"{}")
    assert (status, answer) == (404, {"error": "not_found"})


def test_admin_takes_the_credential_with_or_without_its_bearer_prefix(both: Both) -> None:
    with Admin(both.admin_url, f"Bearer {both.credential}") as admin:
        assert admin.create_holder(ttl=60).scope.sessions == "one"


def test_the_credential_and_tokens_never_reach_the_logs(both: Both) -> None:
    """Run last in this module (pytest keeps file order): every token issued above, and the
    credential sent with every call, must be absent from both servers' output."""
    with both.admin() as admin:
        user = admin.create_holder()
        granted = admin.grant(user.holder_id)
        err = _refused(lambda: admin.renew_session(user.holder_id, "zz"))
        assert err.http_status == 400 and both.credential not in str(err)
    logs = both.logs()
    assert "holder_created" in logs and "/v1/holders" in logs  # the service does log
    assert both.credential not in logs
    for token in (user.token, granted.token):
        assert token not in logs and token[:40] not in logs


def test_admin_over_https_checks_the_certificate(tmp_path: Path) -> None:
    """Off the loopback the service needs TLS; Admin validates its certificate (a CA file or
    the system store) and sends nothing to a server it cannot verify."""
    import ssl

    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    leaf.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    tls = ("--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem"))
    data = tmp_path / "data"
    with (
        serving(tmp_path, "--data", str(data)),
        authority_serving(
            tmp_path, data, tmp_path / "authority", *tls, context=context, scheme="https"
        ) as (_, url, credential),
    ):
        assert url.startswith("https://")
        with Admin(url, credential, ca_file=str(tmp_path / "ca.pem")) as admin:
            assert admin.create_holder().scope.sessions == "one"
        err = _refused(lambda: Admin(url, credential).create_holder())
        assert err.outcome == "not_sent" and credential not in str(err)


def test_an_authority_the_data_directory_does_not_trust_is_refused(tmp_path: Path) -> None:
    from saihm.authority import Authority
    from saihm.compose import initialise
    from saihm.config import Config

    data = tmp_path / "data"
    initialise(Config.for_data(data))
    Authority.open(tmp_path / "stranger", create=True)
    done = subprocess.run(
        [
            SAIHM,
            "authority",
            "serve",
            "--data",
            str(data),
            "--authority-dir",
            str(tmp_path / "stranger"),
            "--listen",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "is not the one" in done.stderr
    assert not (tmp_path / "stranger" / "admin.credential").exists()
    for listen in ("0.0.0.0:8090", "nowhere", "127.0.0.1:99999"):
        done = subprocess.run(
            [
                SAIHM,
                "authority",
                "serve",
                "--data",
                str(data),
                "--authority-dir",
                str(tmp_path / "authority"),
                "--listen",
                listen,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "authority" / "admin.credential").exists()
