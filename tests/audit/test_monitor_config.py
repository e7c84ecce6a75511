"""The monitor tells its own bad configuration (exit 2, "configuration error", nobody
contacted) apart from an operator fault (exit 1, an ALARM)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from saihm.translog.checkpoint import LogKeys
from tests.support.cli import run_command


def _dead_url() -> str:
    """A loopback port nobody listens on: an operator that is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _setup(tmp_path: Path, case: str) -> list[str]:
    state = tmp_path / "state"
    good = tmp_path / "good.txt"
    good.write_text("\n".join(LogKeys.generate("example.org/log").verifier_keys()) + "\n")
    url = _dead_url()
    if case == "scheme":
        return ["ftp://example.org/", "--state", str(state), "--once"]
    if case == "no-host":
        return ["http:///log", "--state", str(state), "--once"]
    if case == "trust-missing":
        return [url, "--state", str(state), "--once", "--trust", str(tmp_path / "nope.txt")]
    if case == "trust-garbage":
        (tmp_path / "bad.txt").write_text("not a key\n")
        return [url, "--state", str(state), "--once", "--trust", str(tmp_path / "bad.txt")]
    if case == "trust-empty":
        (tmp_path / "empty.txt").write_text("# nothing\n")
        return [url, "--state", str(state), "--once", "--trust", str(tmp_path / "empty.txt")]
    if case == "state-is-a-file":
        state.write_text("x")
        return [url, "--state", str(state), "--once"]
    if case == "state-corrupt":
        state.mkdir()
        (state / "monitor.json").write_text("{half")
        return [url, "--state", str(state), "--once"]
    if case == "pinned-garbage":
        (state / ".saihm-mirror").mkdir(parents=True)
        (state / ".saihm-mirror" / "keys.txt").write_text("garbage+key\n")
        return [url, "--state", str(state), "--once"]
    if case == "trust-not-pinned":
        (state / ".saihm-mirror").mkdir(parents=True)
        other = "\n".join(LogKeys.generate("example.org/log").verifier_keys()) + "\n"
        (state / ".saihm-mirror" / "keys.txt").write_text(other)
        return [url, "--state", str(state), "--once", "--trust", str(good)]
    if case == "interval":
        return [url, "--state", str(state), "--once", "--interval", "0"]
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "scheme",
        "no-host",
        "trust-missing",
        "trust-garbage",
        "trust-empty",
        "state-is-a-file",
        "state-corrupt",
        "pinned-garbage",
        "trust-not-pinned",
        "interval",
    ],
)
def test_the_monitors_own_bad_configuration_is_exit_2_and_not_an_alarm(
    tmp_path, capsys, case
) -> None:
    argv = _setup(tmp_path, case)
    assert run_command("monitor", argv) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no round was run, so no round report
    assert err.startswith("saihm: error: configuration error: ") and err.count("\n") == 1
    assert "ALARM" not in err


def test_an_operator_that_is_down_is_an_alarm_exit_1(tmp_path, capsys) -> None:
    good = tmp_path / "good.txt"
    good.write_text("\n".join(LogKeys.generate("example.org/log").verifier_keys()) + "\n")
    argv = [_dead_url(), "--state", str(tmp_path / "s"), "--once", "--trust", str(good)]
    assert run_command("monitor", argv) == 1
    _, err = capsys.readouterr()
    assert "saihm monitor: ALARM: unreachable" in err and "configuration error" not in err
