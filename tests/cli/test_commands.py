"""The pinned command line (DESIGN.md "Command line"), driven as a user drives it.

Each command runs through ``saihm.commands.main.main`` with real arguments against a real data
directory; JSON goes to stdout where pinned; bad input gets one line on stderr, a non-zero exit, no
traceback, and changes nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from saihm.commands.main import main
from saihm.compose import initialise, open_operator
from saihm.config import Config
from saihm.protocol import call as binding_call

SAIHM = str(Path(sys.executable).parent / "saihm")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    return json.loads(out)


def recall(data: Path, token: str, **params: object) -> list[str]:
    operator = open_operator(Config.for_data(data), checkpointer=False)
    try:
        return [c["plaintext"] for c in binding_call(operator, token, "saihm_recall", params)]
    finally:
        operator.store.close()


def remember(data: Path, token: str, content: str, namespace: str = "memory") -> None:
    operator = open_operator(Config.for_data(data), checkpointer=False)
    try:
        binding_call(
            operator, token, "saihm_remember", {"content": content, "namespace": namespace}
        )
    finally:
        operator.store.close()


def log_size(data: Path) -> int:
    operator = open_operator(Config.for_data(data), checkpointer=False)
    try:
        return operator.store.size()
    finally:
        operator.store.close()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data directory as ``saihm serve`` leaves it on first run (only serve creates one)."""
    path = tmp_path / "data"
    initialise(Config.for_data(path))
    return path


def test_holder_create_prints_holder_id_token_and_session(capsys, data) -> None:
    created = run_json(capsys, "holder", "create", "--data", str(data))
    assert set(created) >= {"holderId", "token", "sessionId"}  # pinned keys (and more)
    assert len(bytes.fromhex(created["holderId"])) == 32
    remember(data, created["token"], "from the first session")
    assert recall(data, created["token"]) == ["from the first session"]


def test_session_open_gives_a_new_session_that_starts_empty(capsys, data) -> None:
    """ "Memory and knowledge start out shared within one session only." """
    created = run_json(capsys, "holder", "create", "--data", str(data))
    remember(data, created["token"], "first session")
    opened = run_json(
        capsys, "session", "open", "--data", str(data), "--holder", created["holderId"]
    )
    assert set(opened) >= {"sessionId", "token"}
    assert opened["sessionId"] != created["sessionId"]
    assert recall(data, opened["token"]) == []


def test_grant_widens_to_all_sessions_and_chosen_namespaces_and_revoke_withdraws_it(
    capsys, data
) -> None:
    """A wider scope is a grant a person makes with ``saihm grant``; revocation is honoured on
    the next read."""
    created = run_json(capsys, "holder", "create", "--data", str(data))
    remember(data, created["token"], "work note", namespace="work")
    remember(data, created["token"], "home note", namespace="home")
    size = log_size(data)
    granted = run_json(
        capsys,
        "grant",
        "--data",
        str(data),
        "--holder",
        created["holderId"],
        "--sessions",
        "all",
        "--namespaces",
        "work",
        "--ttl",
        "600",
    )
    assert set(granted) >= {"grantId", "token"}
    assert log_size(data) == size + 1  # the GRANT receipt
    assert recall(data, granted["token"]) == ["work note"]
    revoked = run_json(capsys, "grant", "revoke", "--data", str(data), granted["grantId"])
    assert revoked["revoked"] is True and revoked["changed"] is True
    with pytest.raises(Exception, match="revoked or unknown"):
        recall(data, granted["token"])
    again = run_json(capsys, "grant", "revoke", "--data", str(data), granted["grantId"])
    assert again["changed"] is False


def test_kek_rotate_puts_a_new_generation_in_force_and_live_cells_still_open(capsys, data) -> None:
    created = run_json(capsys, "holder", "create", "--data", str(data))
    remember(data, created["token"], "kept across rotation")
    assert run_json(capsys, "kek", "rotate", "--data", str(data)) == {"kekVersion": 2}
    assert run_json(capsys, "kek", "rotate", "--data", str(data)) == {"kekVersion": 3}
    assert recall(data, created["token"]) == ["kept across rotation"]
    kek_files = sorted(p.name for p in (data.parent / "kek").glob("kek-*"))
    assert kek_files == ["kek-00000003"]


def test_rebuild_reports_byte_identical_projections(capsys, data) -> None:
    created = run_json(capsys, "holder", "create", "--data", str(data))
    remember(data, created["token"], "a")
    report = run_json(capsys, "rebuild", "--data", str(data))
    assert report["identical"] is True and report["difference"] is None
    assert report["events"] == log_size(data)


def test_export_then_verify_through_the_command_line(capsys, data, tmp_path) -> None:
    created = run_json(capsys, "holder", "create", "--data", str(data))
    remember(data, created["token"], "audited")
    bundle = tmp_path / "bundle.saihm"
    code, _, err = run(capsys, "export", "--data", str(data), "--out", str(bundle))
    assert code == 0, err
    code, out, err = run(capsys, "verify", str(bundle), "--no-progress")
    assert code == 0, out + err
    code, out, _ = run(capsys, "verify", "--help")
    assert code == 0 and "--checkpoint" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["session", "open", "--holder", "zz"],
        ["session", "open", "--holder", "ab" * 32],
        ["grant", "--holder", "ab" * 32],
        ["grant", "--holder", "zz", "--sessions", "all"],
        ["grant", "--holder", "ab" * 32, "--sessions", "all", "--ttl", "0"],
        ["grant", "--holder", "ab" * 32, "--sessions", "all"],
        ["grant", "revoke", "not-hex"],
        ["grant", "revoke", "cd" * 32],
        ["grant", "withdraw", "cd" * 32],
        ["grant", "revoke"],
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit_and_changes_nothing(capsys, data, argv) -> None:
    run_json(capsys, "holder", "create", "--data", str(data))
    size = log_size(data)
    code, out, err = run(capsys, argv[0], *argv[1:], "--data", str(data))
    assert code != 0
    assert out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith(
        ("saihm: error: ", "saihm grant: error: ", "saihm grant revoke: error: ")
    )
    assert err.count("\n") <= 3  # argparse prints its usage line before the error
    assert "Traceback" not in err
    assert log_size(data) == size


def test_the_installed_script_exits_non_zero_on_unknown_commands_and_prints_help(tmp_path) -> None:
    done = subprocess.run([SAIHM, "frobnicate"], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    done = subprocess.run([SAIHM], capture_output=True, text=True)
    assert done.returncode == 0
    for command in (
        "serve",
        "holder",
        "session",
        "grant",
        "kek",
        "rebuild",
        "export",
        "verify",
        "monitor",
        "replay",
        "memory",
        "bench",
    ):
        assert command in done.stdout


def test_log_keys_can_live_off_the_data_volume_and_offline_tools_still_verify(
    capsys, tmp_path
) -> None:
    """With --log-keys-dir the data directory holds no checkpoint signing key, only the public
    verifier keys that export and verify need."""
    data, keys = tmp_path / "data", tmp_path / "elsewhere" / "log-keys"
    initialise(Config.for_data(data, log_keys_dir=keys))
    created = run_json(capsys, "holder", "create", "--data", str(data), "--log-keys-dir", str(keys))
    operator = open_operator(Config.for_data(data, log_keys_dir=keys), checkpointer=False)
    try:
        binding_call(operator, created["token"], "saihm_remember", {"content": "signed elsewhere"})
    finally:
        operator.store.close()
    assert not (data / "log-keys").exists()
    assert any(p.name.endswith(".key") or "PRIVATE" in p.read_text() for p in keys.iterdir())
    for path in data.rglob("*"):
        if path.is_file() and path.suffix != ".mdb":
            assert "PRIVATE+KEY" not in path.read_text(errors="ignore"), path
    published = (data / "checkpoint-verifier-keys.txt").read_text().split()
    assert published == [
        line for line in (keys / "checkpoint-verifier-keys.txt").read_text().split()
    ]
    bundle = tmp_path / "bundle.saihm"
    assert run(capsys, "export", "--data", str(data), "--out", str(bundle))[0] == 0
    code, out, err = run(capsys, "verify", str(bundle), "--no-progress")
    assert code == 0, out + err
