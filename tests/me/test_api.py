"""The person's actions (``/me/v1/...``) and the page's files, over plain HTTP."""

from __future__ import annotations

import json

from tests.support.cli import one_line_refusal, run_saihm
from tests.support.serve import fetch, holder_create, post, serving

CSP_PARTS = ("default-src 'none'", "script-src 'self'", "connect-src 'self'")


def _call(world, path, token=None, body=None):
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    status, raw = fetch(world.url + path, data=data, headers=headers)
    return status, json.loads(raw)


def test_the_page_and_its_files_carry_the_strict_csp(world):
    import urllib.request

    for path in ("me/", "me/me.js", "me/me.css"):
        with urllib.request.urlopen(world.url + path, timeout=30) as resp:
            csp = resp.headers["Content-Security-Policy"]
            assert all(part in csp for part in CSP_PARTS), csp
            assert resp.headers["Cache-Control"] == "no-store"
    assert fetch(world.url + "me/other.js")[0] == 404


def test_a_session_token_may_not_act_for_the_person(world):
    for path, body in (
        ("me/v1/grants", None),
        ("me/v1/pending", None),
        ("me/v1/grants/revoke", {"grantId": world.agent_grant}),
        ("me/v1/pending/reject", {"id": world.proposal_id}),
    ):
        assert _call(world, path, world.session_token, body) == (
            403,
            {"error": "not_permitted"},
        )
        assert _call(world, path, None, body)[0] == 401
    assert _call(world, "me/v1/grants", world.consumer_token)[0] == 403


def test_bad_bodies_are_clear_errors_and_change_nothing(world):
    token = world.person_token
    bodies = (
        b"{",
        b"[]",
        b"[" * 100_000,
        {"grantId": "zz"},
        {"grantId": world.agent_grant, "x": 1},
    )
    for body in bodies:
        status, answer = _call(world, "me/v1/grants/revoke", token, body)
        assert status == 400 and set(answer) == {"error"}
    status, _ = _call(world, "me/v1/grants", token)
    assert status == 200


def test_another_holders_grant_is_not_found(world):
    import subprocess

    from tests.support.serve import SAIHM

    other = holder_create(world.data)
    done = subprocess.run(
        [
            SAIHM,
            "grant",
            "--data",
            str(world.data),
            "--holder",
            other["holderId"],
            "--sessions",
            "all",
        ],
        capture_output=True,
        check=True,
        text=True,
    )
    grant_id = json.loads(done.stdout)["grantId"]
    body = {"grantId": grant_id}
    assert _call(world, "me/v1/grants/revoke", world.person_token, body) == (
        404,
        {"error": "grant_not_found"},
    )
    status, receipts = fetch(world.url + f"log/v1/receipts?subjectId={grant_id}")
    assert status == 200
    assert [e["receipt"]["operation"] for e in json.loads(receipts)["receipts"]] == ["GRANT"]


def test_the_script_never_parses_text_as_html():
    from pathlib import Path

    import saihm.http.me as me

    source = (Path(me.__file__).parent / "static" / "me.js").read_text()
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "localStorage",
        "sessionStorage",
        "document.cookie",
    ):
        assert sink not in source, f"me.js uses {sink}"


def test_rejecting_a_proposal_drops_it_once(world):
    token = world.person_token
    status, listed = _call(world, "me/v1/pending", token)
    assert status == 200
    assert [p["id"] for p in listed["pending"]] == [world.proposal_id]
    assert listed["pending"][0]["record"]["content"] == {"fact": world.proposal_text}
    body = {"id": world.proposal_id}
    assert _call(world, "me/v1/pending/reject", token, body) == (
        200,
        {"rejected": True, "id": world.proposal_id},
    )
    assert _call(world, "me/v1/pending", token) == (200, {"pending": []})
    for path in ("me/v1/pending/reject", "me/v1/pending/accept"):
        assert _call(world, path, token, body) == (404, {"error": "proposal_not_found"})


def test_person_actions_is_retired_and_no_grant_acts_with_it(tmp_path):
    """``--person-actions`` prints one line and changes nothing: an agent's holder-wide grant
    is refused every action of the page, and the grant keeps working."""
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data), "--person-actions") as (_, url):
        holder = holder_create(data)
        done = run_saihm(
            "grant", "--data", str(data), "--holder", holder["holderId"], "--sessions", "all"
        )
        grant = json.loads(done.stdout)
        token = grant["token"]
        for path, body in (
            ("me/v1/grants", None),
            ("me/v1/pending", None),
            ("me/v1/grants/revoke", {"grantId": grant["grantId"]}),
            ("me/v1/pending/accept", {"id": "ab" * 32}),
            ("me/v1/pending/reject", {"id": "ab" * 32}),
            ("me/v1/call", {"method": "saihm_status", "params": {}}),
        ):
            status, answer = _request(url, path, token, body)
            assert (status, answer) == (403, {"error": "not_permitted"}), path
        # The grant still works: nothing was withdrawn.
        assert post(url, token, "saihm_recall", {})[0] == 200
    said = (tmp_path / "serve.err").read_text()
    assert said.count("--person-actions is retired") == 1


def test_the_person_link_and_token_reach_no_log(world):
    link = world.person_link()
    code = link.split("#enrol=", 1)[1]
    assert link.startswith(world.page_url + "me/#enrol=")
    output = world.server_output()
    assert code not in output and code.split(".")[1] not in output
    assert world.person_token not in output
    assert world.person_token.split(".", 1)[1] not in output


def test_the_cli_mints_a_link_beside_a_default_serve(world):
    """``saihm person-link`` (the authority in process, beside a development serve)."""
    done = run_saihm(
        "person-link",
        "--data",
        str(world.data),
        "--holder",
        world.holder_id,
        "--operator-url",
        world.page_url,
    )
    link = json.loads(done.stdout)
    assert link["url"].startswith(world.page_url + "me/#enrol=")
    code = link["url"].split("#enrol=", 1)[1]
    options = world.ceremony("me/v1/enrol/options", {"link": code})
    assert options["publicKey"]["rp"]["id"] == "localhost"
    refused = run_saihm("person-link", "--data", str(world.data), "--holder", "ab" * 32)
    assert "holder" in one_line_refusal(refused)


def _request(url, path, token, body=None):
    data = None if body is None else json.dumps(body).encode()
    status, raw = fetch(url + path, data=data, headers={"Authorization": f"Bearer {token}"})
    return status, json.loads(raw)


def test_an_operator_url_no_passkey_could_bind_to_is_refused_in_one_line(tmp_path):
    data = tmp_path / "data"
    for url in ("http://127.0.0.1:8080/", "http://example.com/", "ftp://localhost/"):
        done = run_saihm(
            "authority",
            "serve",
            "--data",
            str(data),
            "--authority-dir",
            str(tmp_path / "authority"),
            "--operator-url",
            url,
            "--listen",
            "127.0.0.1:0",
        )
        assert "operator URL" in one_line_refusal(done) or "IP address" in done.stderr, url
        assert done.returncode == 2


def test_the_cli_refuses_an_ip_operator_url(world):
    done = run_saihm(
        "person-link",
        "--data",
        str(world.data),
        "--holder",
        world.holder_id,
        "--operator-url",
        "http://127.0.0.1:8080/",
    )
    assert "host name" in one_line_refusal(done)
