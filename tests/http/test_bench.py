"""``saihm bench http`` runs small and prints figures of the pinned shape."""

from __future__ import annotations

KEYS = {"bench", "figure", "value", "unit", "peer", "peer_value", "ratio"}


def test_bench_http_small_run_yields_every_figure():
    from saihm.bench.http import run

    figures = list(run(["--seconds", "0.3", "--n", "3", "--concurrency", "2", "--cells", "1"]))
    assert [f["figure"] for f in figures] == [
        "remember_per_s_http_1_worker",
        "recall_p50_ms_http_1_worker",
        "remember_per_s_http_2_workers",
        "recall_p50_ms_http_2_workers",
        "remember_per_s_2_workers_vs_1",
    ]
    for figure in figures:
        assert set(figure) == KEYS and figure["bench"] == "http"
        assert figure["value"] > 0 and figure["peer_value"] > 0 and figure["ratio"] > 0
