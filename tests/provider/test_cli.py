"""``saihm memory ...`` end to end over a temporary data directory (JSON out, errors one line)."""

from __future__ import annotations

import json

import pytest

from saihm.compose import initialise
from saihm.config import Config
from tests.support.cli import run_command


@pytest.fixture
def run(tmp_path, capsys):
    data = str(tmp_path / "data")
    initialise(Config.for_data(data))  # as `saihm serve` leaves it; only serve creates one

    def go(*argv: str, ok: bool = True) -> object:
        action, *rest = argv
        code = run_command("memory", [action, "--data", data, *rest])
        out, err = capsys.readouterr()
        if ok:
            assert code == 0, err
            return json.loads(out)
        assert code != 0
        assert out == "" and len(err.strip().splitlines()) == 1
        return err

    go("init")
    return go


def test_full_cycle(run, tmp_path):
    meta = json.loads((tmp_path / "data" / "provider" / "local-vault.json").read_text())
    assert meta["providerId"] == "local-vault" and len(meta["holderId"]) == 64
    assert "token" not in json.dumps(meta)
    run("store", "--namespace", "preferences", "--json", '{"fact": "tabs"}', "--confidence", "0.9")
    run("store", "--namespace", "health", "--json", '{"fact": "private"}')
    granted = run("grant", "cursor", "--memory", "preferences", "--write", "--sections", "coding")
    assert granted["grant"]["memory"] == {
        "provider_id": "local-vault",
        "namespaces": ["preferences"],
        "mode": "readwrite",
    }
    token = granted["token"]
    excerpt = run("query", "--consumer-token", token)
    assert [r["content"] for r in excerpt["records"]] == [{"fact": "tabs"}]
    block = run("export", "--consumer-token", token, "--namespaces", "preferences")
    assert block["memory"]["provider"] == "local-vault"
    err = run("query", "--consumer-token", token, "--namespaces", "health", ok=False)
    assert "outside the grant" in err
    propose = ("propose", "--consumer-token", token, "--namespace", "preferences", "--json")
    ref = run(*propose, '{"fact": "dark mode"}')
    assert ref["state"] == "pending"
    assert len(run("query", "--consumer-token", token)["records"]) == 1
    (held,) = run("pending")["pending"]
    assert held["record"] == {"content": {"fact": "dark mode"}}
    stored = run("accept", held["id"])
    assert stored["state"] == "stored"
    assert len(run("query", "--consumer-token", token)["records"]) == 2
    ref2 = run(*propose, '{"fact": "nope"}')
    assert run("reject", ref2["id"])["rejected"] is True
    run("reject", ref2["id"], ok=False)
    assert run("revoke", "cursor")["revoked"] is True
    assert "revoked" in run("query", "--consumer-token", token, ok=False)


def test_bad_input_is_one_line(run):
    run("store", "--namespace", "n", "--json", "{not json", ok=False)
    run("store", "--namespace", "n", "--json", "{}", "--confidence", "2", ok=False)
    run("query", "--consumer-token", "garbage", ok=False)
    run("accept", "zz", ok=False)
    run("revoke", "nobody", ok=False)


def test_help_exits_zero(capsys):
    assert run_command("memory", ["--help"]) == 0
    assert "init" in capsys.readouterr().out


def test_the_persons_store_and_forget_need_no_authority_key(run, tmp_path):
    # The person acts in process with their own Access: no token is minted, so a data
    # directory whose authority key is not on this machine can still store and forget.
    authority = tmp_path / "authority"
    authority.rename(tmp_path / "authority-elsewhere")
    ref = run("store", "--namespace", "notes", "--json", '{"fact": "tea"}')
    assert ref["state"] == "stored" and len(ref["id"]) == 64
    assert run("forget", ref["id"])["erased"] is True
    err = run("grant", "cursor", "--memory", "notes", ok=False)  # issuing a token still needs it
    assert "Traceback" not in err
