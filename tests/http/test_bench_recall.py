"""``saihm bench recall`` runs small and prints figures of the pinned shape."""

from __future__ import annotations

from pathlib import Path

KEYS = {"bench", "figure", "value", "unit", "peer", "peer_value", "ratio"}


def test_bench_recall_small_run_yields_every_figure(tmp_path: Path) -> None:
    from saihm.bench.recall import run
    from saihm.commands.bench import PARSED

    args = [
        *("--sizes", "30", "--samples", "2", "--cold", "1", "--workers", "1"),
        *("--cache-dir", str(tmp_path), "--conversations", "1"),
    ]
    figures = list(run(PARSED["recall"](args)))
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


def _locomo_like(folder: Path) -> None:
    """A conversation in LoCoMo's file shape (written here, not LoCoMo's data): two sessions,
    a question with its evidence turn, one of a category without evidence (5) left out."""
    import json

    conv = {
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey cat named Pixel."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! How old is Pixel?"},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "Two years old, a rescue."},
        ],
        "session_2_date_time": "3:00 pm on 9 June, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "I started learning the cello."},
            {"speaker": "Ana", "dia_id": "D2:2", "text": "Nice", "blip_caption": "a cello"},
        ],
        "qa": [
            {"question": "What is the name of Ana's cat?", "evidence": ["D1:1"], "category": 4},
            {"question": "Which instrument is Ben learning?", "evidence": ["D2:1"], "category": 1},
            {"question": "What is Ana's dog called?", "category": 5},
        ],
    }
    (folder / "1.json").write_text(json.dumps(conv))


def test_bench_recall_reads_locomo_from_a_folder(tmp_path: Path) -> None:
    from saihm.bench.recall import load_locomo, run
    from saihm.commands.bench import PARSED

    _locomo_like(tmp_path)
    (conv,) = load_locomo(tmp_path)
    assert len(conv.questions) == 2  # category 5 has no evidence
    photo = "(3:00 pm on 9 June, 2023) Ana: Nice [shares a photo: a cello]"
    assert conv.turns[4] == ("D2:2", photo)
    args = ["--skip-latency", "--conversations", "1", "--sets", "corrections"]
    figures = {f["figure"]: f for f in run(PARSED["recall"]([*args, "--locomo", str(tmp_path)]))}
    for metric in ("hit5", "hit10", "recall10", "mrr", "query_p50_ms", "query_p99_ms"):
        assert f"set_locomo_{metric}" in figures
    hit = figures["set_locomo_hit10"]
    assert hit["value"] == 1.0 and hit["questions"] == 2 and hit["turns"] == 5
    assert "rank_bm25" in hit["peer"]


def test_bench_recall_refuses_a_locomo_folder_that_is_not_one(tmp_path: Path) -> None:
    import pytest

    from saihm.bench.recall import run
    from saihm.commands.bench import PARSED
    from saihm.errors import MalformedInput

    with pytest.raises(MalformedInput, match="--locomo"):
        list(run(PARSED["recall"](["--skip-latency", "--locomo", str(tmp_path / "absent")])))
    with pytest.raises(MalformedInput, match="no LoCoMo conversation"):
        list(
            run(
                PARSED["recall"](
                    ["--skip-latency", "--sets", "corrections", "--locomo", str(tmp_path)]
                )
            )
        )
