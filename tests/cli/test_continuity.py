"""Continuity across sessions, the way requirements.txt allows it.

"Memory and knowledge start out shared within one session only. Any wider sharing is a
capability that a person grants, not the default." Every token-issuing command says what the
token may see and when it expires; ``saihm grant --sessions all --ttl`` is the one path to
recall across sessions; ``saihm session renew`` keeps a session alive with a fresh token.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from saihm.client import Client, ClientError
from saihm.commands.main import main
from saihm.protocol import call as binding_call
from tests.support.serve import SAIHM, serving


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data directory as ``saihm serve`` leaves it on first run (only serve creates one)."""
    from saihm.compose import initialise
    from saihm.config import Config

    path = tmp_path / "data"
    initialise(Config.for_data(path))
    return path


def run(capsys, *argv: str) -> tuple[dict, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


def cli(*argv: str) -> tuple[dict, str]:
    done = subprocess.run([SAIHM, *argv], capture_output=True, text=True, check=True)
    return json.loads(done.stdout), done.stderr


def test_continuity_path_second_session_recalls_first_only_through_a_grant_until_it_expires(
    tmp_path: Path,
) -> None:
    """The Done-when test, against a real ``saihm serve`` driven as docs/integrations.md says."""
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        first, _ = cli("holder", "create", "--data", str(data))
        holder = first["holderId"]
        with Client(url, f"Bearer {first['token']}") as session_one:
            session_one.remember("continuity: the user prefers green tea")

        second, _ = cli("session", "open", "--data", str(data), "--holder", holder)
        with Client(url, f"Bearer {second['token']}") as session_two:
            assert session_two.recall("green tea") == []  # the default: one session only

        granted, said = cli(
            "grant", "--data", str(data), "--holder", holder, "--sessions", "all", "--ttl", "2"
        )
        assert granted["scope"]["sessions"] == "all" and "every session" in said
        with Client(url, f"Bearer {granted['token']}") as across:
            texts = [c.plaintext for c in across.recall("green tea")]
            assert texts == ["continuity: the user prefers green tea"]
            deadline = time.monotonic() + 30
            while True:  # bounded poll on the real condition: the grant's expiry
                try:
                    across.recall("green tea")
                except ClientError as err:
                    assert (err.code, err.http_status) == ("unauthenticated", 401)
                    break
                assert time.monotonic() < deadline, "the grant did not expire"
                time.sleep(0.2)
        with Client(url, f"Bearer {second['token']}") as session_two:
            assert session_two.recall("green tea") == []


def test_every_token_issuing_command_says_what_it_sees_and_when_it_expires(
    capsys, data: Path
) -> None:
    data = str(data)
    before = int(time.time())
    created, said = run(capsys, "holder", "create", "--data", data)
    holder, session = created["holderId"], created["sessionId"]
    assert created["scope"] == {"sessions": "one", "sessionId": session, "namespaces": None}
    assert before + 30 * 86_400 <= created["expiresAt"] <= int(time.time()) + 30 * 86_400
    assert created["expiresAtUtc"].endswith("Z")
    assert said.count("\n") == 1 and f"only session {session}" in said
    assert "in 30 days" in said
    assert f"saihm grant --data {Path(data).absolute()} --holder {holder} --sessions all" in said
    assert "saihm session renew" in said

    opened, said = run(
        capsys, "session", "open", "--data", data, "--holder", holder, "--ttl", "600"
    )
    assert opened["scope"]["sessions"] == "one" and "in 10 minutes" in said
    assert opened["expiresAt"] - int(time.time()) <= 600

    granted, said = run(
        capsys,
        "grant",
        "--data",
        data,
        "--holder",
        holder,
        "--sessions",
        "all",
        "--namespaces",
        "work,home",
        "--ttl",
        "7200",
    )
    assert granted["scope"] == {
        "sessions": "all",
        "grantId": granted["grantId"],
        "namespaces": ["work", "home"],
    }
    assert "every session" in said and "namespaces work,home" in said and "in 2 hours" in said
    assert f"saihm grant revoke --data {Path(data).absolute()} {granted['grantId']}" in said
    for token in (created["token"], opened["token"], granted["token"]):
        assert token not in said


def test_a_grant_without_ttl_lasts_as_long_as_a_session_token(capsys, data: Path) -> None:
    """Issue #25: "the person's cross-session grant a newcomer needs expires after 1 hour
    unless --ttl is given; then the agent gets 401". The default is now 30 days, as long as
    a session token, and the command says so where the token is issued."""
    created, _ = run(capsys, "holder", "create", "--data", str(data))
    before = int(time.time())
    granted, said = run(
        capsys,
        "grant",
        "--data",
        str(data),
        "--holder",
        created["holderId"],
        "--sessions",
        "all",
    )
    assert before + 30 * 86_400 <= granted["expiresAt"] <= int(time.time()) + 30 * 86_400
    assert granted["expiresAt"] >= created["expiresAt"] - 5
    assert "(in 30 days)" in said and granted["expiresAtUtc"] in said


def test_session_renew_gives_a_fresh_token_for_the_same_session(capsys, data: Path) -> None:
    from saihm.compose import open_operator
    from saihm.config import Config

    created, _ = run(capsys, "holder", "create", "--data", str(data))
    operator = open_operator(Config.for_data(data), checkpointer=False)
    try:
        binding_call(operator, created["token"], "saihm_remember", {"content": "written first"})
    finally:
        operator.store.close()
    renewed, said = run(
        capsys,
        "session",
        "renew",
        "--data",
        str(data),
        "--holder",
        created["holderId"],
        "--session",
        created["sessionId"],
        "--ttl",
        "60",
    )
    assert renewed["sessionId"] == created["sessionId"] and renewed["token"] != created["token"]
    assert renewed["scope"]["sessionId"] == created["sessionId"] and "in 1 minute" in said
    operator = open_operator(Config.for_data(data), checkpointer=False)
    try:
        binding_call(
            operator, created["token"], "saihm_remember", {"content": "written with the old"}
        )
        binding_call(
            operator, renewed["token"], "saihm_remember", {"content": "written with the new"}
        )
        for token in (created["token"], renewed["token"]):
            texts = sorted(
                c["plaintext"] for c in binding_call(operator, token, "saihm_recall", {})
            )
            assert texts == ["written first", "written with the new", "written with the old"]
    finally:
        operator.store.close()


@pytest.mark.parametrize(
    "argv",
    [
        ["session", "renew", "--holder", "ab" * 32, "--session", "cd" * 32],  # no such holder
        ["session", "renew", "--holder", "HOLDER", "--session", "zz"],
        ["session", "renew", "--holder", "HOLDER"],
        ["session", "open", "--holder", "HOLDER", "--ttl", "0"],
        ["holder", "create", "--ttl", "-5"],
        ["session", "renew", "--holder", "HOLDER", "--session", "cd" * 32, "--ttl", "soon"],
    ],
)
def test_bad_renewals_and_lifetimes_are_one_line_errors_that_issue_nothing(
    capsys, data: Path, argv: list[str]
) -> None:
    data = str(data)
    created, _ = run(capsys, "holder", "create", "--data", data)
    argv = [a.replace("HOLDER", created["holderId"]) for a in argv]
    code = main([*argv[:2], "--data", data, *argv[2:]])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _renew_refused(capsys, data: str, holder: str, session: str) -> str:
    """``saihm session renew`` for ``session``: exit 2, nothing on stdout, one line on stderr."""
    capsys.readouterr()
    code = main(["session", "renew", "--data", data, "--holder", holder, "--session", session])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def _log_size(data: str) -> int:
    from saihm.config import Config
    from saihm.store import Store

    with Store(Config.for_data(Path(data))) as store:
        return store.size()


def test_session_renew_refuses_an_unknown_holder_or_a_revoked_session(capsys, data: Path) -> None:
    """Issue 21: renew issued tokens for any session, revoked ones included. A revoked session
    and an unknown holder are refused with one line, no token printed and nothing logged; a
    session that has not written yet still renews (the hint holder create prints)."""
    from saihm.compose import open_operator
    from saihm.config import Config

    data = str(data)
    created, _ = run(capsys, "holder", "create", "--data", data)
    holder = created["holderId"]
    fresh, _ = run(
        capsys,
        "session",
        "renew",
        "--data",
        data,
        "--holder",
        holder,
        "--session",
        created["sessionId"],
    )
    assert fresh["sessionId"] == created["sessionId"]
    operator = open_operator(Config.for_data(Path(data)), checkpointer=False)
    try:
        binding_call(operator, created["token"], "saihm_remember", {"content": "kept"})
        operator.admin.revoke_session(bytes.fromhex(holder), bytes.fromhex(created["sessionId"]))
    finally:
        operator.store.close()
    size = _log_size(data)
    err = _renew_refused(capsys, data, holder, created["sessionId"])
    assert "revoked" in err
    assert "no such holder" in _renew_refused(capsys, data, "ab" * 32, created["sessionId"])
    assert _log_size(data) == size
