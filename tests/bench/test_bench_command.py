"""``saihm bench``: every figure printed with its floor or peer from the same run and the load
average; the command exits 0 whatever the figures (benchmarks are not tests, issue 24 item 5)
and non-zero only when a benchmark could not run."""

from __future__ import annotations

import json
import os
import types
from collections.abc import Iterator

import pytest

from saihm.bench.figures import figure
from saihm.commands import bench as bench_command
from saihm.commands.main import main
from tests.support.cli import one_line_refusal, run_saihm

PINNED = {"bench", "figure", "value", "unit", "peer", "peer_value", "ratio", "load_average"}


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_a_figure_far_below_its_target_still_exits_zero(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose figures all miss their targets exits 0 and prints every one of them; a
    record a benchmark built by hand (not through ``figure``) gets the load average too."""

    def run(args: list[str]) -> Iterator[dict]:
        yield figure("stub", "far_too_slow_ms", 900.0, "ms", "target 10 ms", 10.0, False)
        yield figure("stub", "far_too_few_per_s", 1.0, "1/s", "floor", 1000.0, True)
        yield dict(
            bench="stub", figure="by_hand", value=0.0, unit="x", peer="p", peer_value=1.0, ratio=0.0
        )

    stub = types.SimpleNamespace(run=run)
    monkeypatch.setattr(bench_command.importlib, "import_module", lambda name: stub)
    monkeypatch.setattr(os, "getloadavg", lambda: (4.0, 3.0, 2.0))
    assert main(["bench", "store"]) == 0
    printed = _lines(capsys.readouterr().out)
    assert [f["figure"] for f in printed] == ["far_too_slow_ms", "far_too_few_per_s", "by_hand"]
    assert all(f["ratio"] < 0.02 for f in printed)
    for f in printed:
        assert set(f) >= PINNED
        assert f["load_average"] == [4.0, 3.0, 2.0]


def test_bench_store_prints_its_recall_figures_with_peers_and_load_and_exits_zero() -> None:
    """A small real run: every line has its peer and the load average, the holder-wide
    figures are the warm ones (with the cold call reported beside them) and top-20 is
    measured; some figures are below their floor (one thread never reaches it), exit 0."""
    small = "--cells 60 --sessions 3 --events 100 --seconds 0.2 --threads 1 --samples 10"
    done = run_saihm("bench", "store", *small.split(), "--top-cells", "80", timeout=600)
    assert done.returncode == 0, done.stderr
    printed = _lines(done.stdout)
    by_name = {f["figure"]: f for f in printed}
    for f in printed:
        assert set(f) >= PINNED and f["bench"] == "store"
        assert len(f["load_average"]) == 3 and all(x >= 0 for x in f["load_average"])
        assert f["peer_value"] > 0
    for name in (
        "recall_holder_wide_p50_ms",
        "recall_holder_wide_top20_p50_ms",
        "recall_holder_wide_top20_80_p50_ms",
    ):
        assert name in by_name, sorted(by_name)
    wide = by_name["recall_holder_wide_p50_ms"]
    assert wide["cells_returned"] == 60 and wide["peer_value"] == 10.0 and wide["cold_ms"] > 0
    top = by_name["recall_holder_wide_top20_80_p50_ms"]
    assert top["cells"] == 80 and top["peer_value"] == 100.0 and top["fill_s"] > 0
    assert by_name["remember_per_s_1_thread"]["ratio"] < 1  # below its floor, still exit 0


def test_a_negative_top_cells_is_refused_in_one_line_before_any_work() -> None:
    done = run_saihm("bench", "store", "--top-cells", "-5")
    assert "--top-cells must not be negative" in one_line_refusal(done)
    assert done.returncode == 2 and done.stdout == ""
