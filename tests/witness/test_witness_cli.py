"""``saihm witness serve``'s command line: bad input is one line and exit status 2, and
nothing listens on a non-loopback address without TLS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from saihm.translog import LogKeys
from tests.support.cli import run_saihm

SAIHM = str(Path(sys.executable).parent / "saihm")


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return run_saihm(*argv, timeout=60)


@pytest.fixture(scope="module")
def vkey() -> str:
    return LogKeys.generate("cli.example/log").verifier_keys()[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["witness"],
        ["witness", "watch"],
        ["witness", "serve"],
        ["witness", "serve", "--state", "S"],
        ["witness", "serve", "--state", "S", "--log", "not-a-key"],
        ["witness", "serve", "--state", "S", "--logs-file", "missing.txt"],
        ["witness", "serve", "--state", "S", "--log", "VKEY", "--host", "0.0.0.0"],
        ["witness", "serve", "--state", "S", "--log", "VKEY", "--port", "70000"],
        ["witness", "serve", "--state", "S", "--log", "VKEY", "--tls-cert", "x.pem"],
        ["witness", "serve", "--state", "S", "--log", "VKEY", "--port", "x"],
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_creates_no_key(tmp_path, vkey, argv) -> None:
    argv = [str(tmp_path / "S") if a == "S" else vkey if a == "VKEY" else a for a in argv]
    done = _run(*argv)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "S" / "witness.key").exists()


def test_help_lists_the_witness_command() -> None:
    done = _run("--help")
    assert done.returncode == 0 and "witness" in done.stdout
    done = _run("witness", "serve", "--help")
    assert done.returncode == 0 and "--logs-file" in done.stdout


def test_every_acknowledged_cosignature_survives_kill_9(tmp_path) -> None:
    """tlog-witness: "The witness MUST persist the new checkpoint before responding". A
    witness killed with SIGKILL while a log keeps submitting has on disk at least the largest
    size it answered 200 for, and carries on from there after a restart."""
    import signal
    import threading
    import time

    from saihm.translog.witness import add_checkpoint_body
    from saihm.witness.state import WitnessState
    from tests.support.serve import fetch, free_port
    from tests.witness.test_witness_server import ORIGIN_A, FakeLog, _keys

    keys = _keys(ORIGIN_A)
    (tmp_path / "keys.txt").write_text("\n".join(keys.verifier_keys()) + "\n")
    log = FakeLog(keys, 1)

    def start() -> tuple[subprocess.Popen, str]:
        port = free_port()
        proc = subprocess.Popen(
            [
                SAIHM,
                "witness",
                "serve",
                "--state",
                str(tmp_path / "w"),
                "--port",
                str(port),
                "--logs-file",
                str(tmp_path / "keys.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}/add-checkpoint"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if fetch(url, data=b"x", timeout=2)[0] == 400:
                    return proc, url
            except OSError:
                pass
            time.sleep(0.05)
        proc.kill()
        pytest.fail("witness did not start")

    proc, url = start()
    acked = [0]

    def submit() -> None:
        # Submits until the witness dies; ``acked`` moves only after a 200 has arrived.
        while True:
            log.grow(3)
            body = add_checkpoint_body(acked[0], log.proof(acked[0]), log.note())
            try:
                status, _ = fetch(url, data=body, timeout=30)
            except OSError:
                return
            if status != 200:
                return
            acked[0] = len(log.hashes)

    thread = threading.Thread(target=submit)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while acked[0] < 30 and time.monotonic() < deadline:
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)  # while a request is most likely in flight
    finally:
        proc.wait(timeout=30)
        thread.join(timeout=60)
    assert acked[0] >= 30
    acked = acked[0]
    state = WitnessState(tmp_path / "w")
    try:
        # At least what was acknowledged; more if the kill fell between commit and answer.
        stored = state.head(ORIGIN_A).size
        assert stored >= acked
    finally:
        state.close()
    proc, url = start()
    try:
        log.grow(3)
        body = add_checkpoint_body(stored, log.proof(stored), log.note())
        assert fetch(url, data=body, timeout=30)[0] == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
