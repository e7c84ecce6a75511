"""``saihm bench NAME [OPTIONS]`` parsed in the commands' style (saihm/commands/bench.py):
each benchmark takes typed options, whose defaults its parser shows (recall and witness keep
their old help), and parses no words itself."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

from saihm.bench import NAMES
from saihm.commands import bench as bench_command

PARSED = sorted(bench_command.PARSED)
BENCH = Path(bench_command.__file__).resolve().parent.parent / "bench"


def test_every_benchmark_is_parsed_by_the_command() -> None:
    assert sorted(NAMES) == PARSED


@pytest.mark.parametrize("name", PARSED)
def test_no_options_are_the_typed_defaults(name: str) -> None:
    opts = bench_command.PARSED[name]([])
    assert dataclasses.is_dataclass(opts) and opts == type(opts)()
    assert type(opts).__module__ == f"saihm.bench.{name}"


@pytest.mark.parametrize("name", PARSED)
def test_the_module_parses_no_words(name: str) -> None:
    source = (BENCH / f"{name}.py").read_text()
    imported = {
        alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    } | {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "argparse" not in imported and "saihm.commands.helpformat" not in imported


def test_options_become_typed_values() -> None:
    from saihm.bench.store import StoreOptions

    opts = bench_command.PARSED["store"](["--cells", "60", "--seconds", "0.5", "--top-cells", "7"])
    assert opts == StoreOptions(cells=60, seconds=0.5, top_cells=7)


def test_a_bad_http_count_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        bench_command.PARSED["http"](["--n", "0"])
    assert done.value.code == 2
    assert "--seconds, --n and --concurrency must be positive" in capsys.readouterr().err


def test_recall_options_become_typed_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from saihm.bench.recall import RecallOptions

    seen: list[object] = []
    recall = importlib.import_module("saihm.bench.recall")
    monkeypatch.setattr(recall, "run", lambda opts: seen.append(opts) or iter(()))
    argv = ["--samples", "3", "--sizes", "30", "--skip-latency", "--locomo", "/x"]
    assert list(bench_command.figures("recall", argv)) == []
    assert seen == [
        RecallOptions(samples=3, sizes="30", skip_latency=True, locomo="/x"),
    ]


def test_a_recall_option_that_is_not_a_count_is_refused_by_the_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        bench_command.PARSED["recall"](["--samples", "many"])
    assert done.value.code == 2
    assert "saihm bench recall: error: argument --samples" in capsys.readouterr().err


def test_recall_takes_none_for_no_model_as_serve_does() -> None:
    from saihm.bench.recall import RecallOptions

    assert bench_command.PARSED["recall"](["--embedding-model", "none"]) == RecallOptions()
    parsed = bench_command.PARSED["recall"](["--embedding-model", "/m"])
    assert parsed.embedding_model == "/m"
