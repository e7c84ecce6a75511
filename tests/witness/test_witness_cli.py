"""``saihm witness serve``'s command line: bad input is one line and exit status 2, and
nothing listens on a non-loopback address without TLS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from saihm.translog import LogKeys

SAIHM = str(Path(sys.executable).parent / "saihm")


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([SAIHM, *argv], capture_output=True, text=True, timeout=60)


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
