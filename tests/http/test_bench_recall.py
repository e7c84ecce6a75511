"""``saihm bench recall`` runs small and prints figures of the pinned shape."""

from __future__ import annotations

from pathlib import Path

KEYS = {"bench", "figure", "value", "unit", "peer", "peer_value", "ratio"}


def test_bench_recall_small_run_yields_every_figure(tmp_path: Path) -> None:
    from saihm.bench.recall import run

    args = [
        *("--sizes", "30", "--samples", "2", "--cold", "1", "--workers", "1"),
        *("--cache-dir", str(tmp_path), "--conversations", "1"),
    ]
    figures = list(run(args))
    names = [f["figure"] for f in figures]
    for kind in ("all", "top20"):
        for stage in ("warm", "cold"):
            assert f"recall_{kind}_30_{stage}_p50_ms" in names
            assert f"recall_{kind}_30_{stage}_p99_ms" in names
        assert f"recall_{kind}_30_naive_cold_ms" in names
    assert {"cache_bytes_30", "cache_bound_holds_30"} <= set(names)
    assert {"quality_hit5", "quality_hit10", "quality_mrr"} <= set(names)
    for name in ("conversational", "corrections"):  # the shipped sets (saihm/bench/sets/)
        for metric in ("hit1", "hit3", "hit10", "mrr", "query_p50_ms", "query_p99_ms"):
            assert f"set_{name}_{metric}" in names
    assert "set_corrections_newer_first" in names
    for figure in figures:
        assert set(figure) >= KEYS and figure["bench"] == "recall"
        # A quality peer may score 0 (plain BM25 never puts a correction first).
        assert figure["value"] >= 0 and figure["peer_value"] >= 0
    # The store is built once and reused by the next run.
    assert (tmp_path / "cells-30" / "manifest.json").exists()


def test_the_bench_store_rebuilds_identical(tmp_path: Path) -> None:
    """The bench writes its cells 250 to a change (saihm/bench/recall.py ``_build``), where the
    operator writes one per saihm_remember: the projections of such multi-cell changes,
    applied live, must still equal a rebuild from the log byte for byte (docs/operations.md
    "Rebuild"), or ``saihm rebuild`` and ``saihm verify --data`` would flag the bench's store."""
    import json

    from saihm.bench.recall import CHUNK, _build
    from tests.support.cli import run_saihm

    cells = CHUNK + 10  # one full change and one partial
    _build(tmp_path, cells, 1)
    done = run_saihm("rebuild", "--data", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["events"] == cells + 1  # the holder's creation, then one REMEMBER per cell
    assert report["identical"] is True, report["difference"]


def test_a_bench_store_cached_by_another_projection_format_is_built_again(
    tmp_path: Path,
) -> None:
    """The bench keeps its store between runs; one built by code of another projection format
    (an older saihm) is built again, not measured or rebuilt as if it were current."""
    import json

    from saihm.bench.recall import _build

    first = _build(tmp_path, 3, 1)
    assert _build(tmp_path, 3, 1) == first  # reused while the format matches
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({**first, "format": 1}))
    again = _build(tmp_path, 3, 1)
    assert again["holder"] != first["holder"]
    assert json.loads(manifest.read_text())["format"] == again["format"] != 1
