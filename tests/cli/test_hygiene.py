"""Command-line hygiene (issue 14, Operations): a typo never creates a store, errors are one
line, a closed pipe is quiet, a missing extra says how to install it, --version answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import saihm
from saihm.commands.main import main, missing_extra

SAIHM = str(Path(sys.executable).parent / "saihm")
H = "ab" * 32


def made_data(tmp_path: Path) -> Path:
    """A data directory as ``saihm serve`` leaves it (store opened once, then closed)."""
    from saihm.compose import open_operator
    from saihm.config import Config

    operator = open_operator(Config.for_data(tmp_path / "data"))
    operator.store.close()
    return tmp_path / "data"


@pytest.mark.parametrize(
    "argv",
    [
        ["holder", "create", "--data", "{typo}"],
        ["session", "open", "--data", "{typo}", "--holder", H],
        ["grant", "--data", "{typo}", "--holder", H, "--sessions", "all"],
        ["grant", "revoke", "--data", "{typo}", H],
        ["kek", "rotate", "--data", "{typo}"],
        ["rebuild", "--data", "{typo}"],
        ["backup", "--data", "{typo}", "{dest}"],
        ["export", "--data", "{typo}", "--out", "{dest}"],
        ["verify", "--data", "{typo}", "--no-progress"],
        ["memory", "init", "--data", "{typo}"],
        ["memory", "pending", "--data", "{typo}"],
    ],
)
def test_commands_other_than_serve_refuse_a_data_directory_that_does_not_exist(
    tmp_path, capsys, argv
) -> None:
    typo, dest = tmp_path / "saihm-dta", tmp_path / "dest"
    code = main([a.format(typo=typo, dest=dest) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(typo) in err
    assert list(tmp_path.iterdir()) == []  # no data, KEK or authority directory appeared


def test_a_directory_that_is_not_a_data_directory_is_refused_too(tmp_path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["holder", "create", "--data", str(tmp_path / "empty")]) == 2
    assert "is not a saihm data directory" in capsys.readouterr().err
    assert list((tmp_path / "empty").iterdir()) == []


def test_version() -> None:
    done = subprocess.run([SAIHM, "--version"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, f"saihm {saihm.__version__}")


def _to_a_closed_pipe(*argv: str) -> subprocess.CompletedProcess:
    """Run ``saihm ARGV`` with stdout a pipe whose reader has already gone (``| head`` after
    head exits): every write fails with EPIPE, deterministically."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [SAIHM, *argv], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120
        )
    finally:
        os.close(write)


def test_a_closed_pipe_is_a_quiet_exit_not_a_traceback(tmp_path) -> None:
    data = made_data(tmp_path)
    for argv in (
        ["--help"],
        ["holder", "create", "--data", str(data)],
        ["verify", "--data", str(data), "--no-progress"],
    ):
        done = _to_a_closed_pipe(*argv)
        # argparse itself drops a failed help write (exit 0); our own output exits 141 as a
        # shell reports SIGPIPE.
        assert done.returncode == (0 if argv == ["--help"] else 141), (argv, done.stderr)
        assert done.stderr == "", (argv, done.stderr)


def test_a_missing_optional_extra_is_an_install_hint() -> None:
    err = ModuleNotFoundError("No module named 'pymerkle'", name="pymerkle")
    assert missing_extra(err) == (
        "this needs the optional pymerkle package: pip install 'saihm[bench]'"
    )
    assert missing_extra(ModuleNotFoundError("x", name="pqcrypto.sign")) == (
        "this needs the optional pqcrypto package: pip install 'saihm[audit]'"
    )
    assert missing_extra(ModuleNotFoundError("x", name="somethingelse")) is None


def _without(module: str, *argv: str) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh interpreter in which ``module`` cannot be imported."""
    code = (
        "import sys\n"
        f"sys.modules[{module!r}] = None\n"
        "from saihm.commands.main import main\n"
        f"sys.exit(main({list(argv)!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_without_pymerkle_bench_says_which_extra_to_install() -> None:
    done = _without("pymerkle", "bench", "translog", "--leaves", "16", "--samples", "1")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "saihm: error: this needs the optional pymerkle package: pip install 'saihm[bench]'"
    )


def test_without_pqcrypto_verify_second_implementation_says_which_extra(tmp_path) -> None:
    data = made_data(tmp_path)
    done = _without(
        "pqcrypto", "verify", "--data", str(data), "--second-implementation", "--no-progress"
    )
    assert done.returncode == 2
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("pip install 'saihm[audit]'")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["replay", "{tmp}", "--out", "{tmp}/r"], "holds no tiled log (no checkpoint file)"),
        (
            ["verify", "--data", "{data}", "--checkpoint", "{tmp}/nope", "--no-progress"],
            "nope: No such file or directory",
        ),
        (["backup", "--data", "{data}", "{tmp}"], "already exists"),
    ],
)
def test_os_errors_are_one_line_without_errno(tmp_path, capsys, argv, needle) -> None:
    data = made_data(tmp_path)
    assert main([a.format(tmp=tmp_path, data=data) for a in argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "[Errno" not in err and len(err.strip().splitlines()) == 1
