"""``saihm-mcp --help`` and ``--version`` answer at once, even with stdin held open (an MCP
host's pipe), and never contact an operator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import saihm

SAIHM_MCP = str(Path(sys.executable).parent / "saihm-mcp")


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["--help"], "SAIHM_ENDPOINT_URL"),
        (["-h"], "usage: saihm-mcp"),
        (["--version"], f"saihm-mcp {saihm.__version__}"),
    ],
)
def test_help_and_version_return_without_reading_stdin(argv, expect) -> None:
    # stdin is a pipe nobody writes to or closes: a server reading it would block until the
    # timeout below (the bound of this test, not a sleep).
    proc = subprocess.Popen(
        [SAIHM_MCP, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin", "SAIHM_ENDPOINT_URL": "https://192.0.2.1/"},
    )
    try:
        proc.wait(timeout=20)  # communicate() would close stdin; keep it open
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.kill()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            pipe.close()
    assert proc.returncode == 0, err
    assert expect in out


def test_an_unknown_option_is_one_usage_error() -> None:
    done = subprocess.run(
        [SAIHM_MCP, "--frobnicate"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("saihm-mcp: error:")
