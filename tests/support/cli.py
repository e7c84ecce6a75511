"""Run the installed ``saihm`` command as a subprocess (shared by the CLI and end-to-end tests)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.serve import SAIHM

__all__ = ["one_line_refusal", "run_command", "run_saihm"]


def run_saihm(
    *argv: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``saihm ARGV`` with text output captured and a bounded run time; ``env`` is added to this
    process's environment; the completed process is returned whatever its exit status."""
    return subprocess.run(
        [SAIHM, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        input=input,
        env={**os.environ, **(env or {})},
    )


def one_line_refusal(done: subprocess.CompletedProcess[str], *secrets: str) -> str:
    """The one stderr line of a refused command, after checking the project's rule for bad
    input on the CLI (a non-zero exit, one line, no traceback) and that none of ``secrets``
    was shown on either stream."""
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for secret in secrets:
        assert secret not in done.stderr + done.stdout
    return lines[0]


def run_command(name: str, argv: list[str]) -> int:
    """``saihm NAME ARGV`` in this process (saihm.commands.main.main): its exit code. Output
    goes to this process's stdout and stderr (capsys reads them)."""
    from saihm.commands.main import main

    return main([name, *argv])
