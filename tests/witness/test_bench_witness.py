"""``saihm bench witness`` yields its three figures in the shared shape."""

from __future__ import annotations

from saihm.bench.witness import WitnessOptions, run


def test_bench_witness_figures():
    figures = list(run(WitnessOptions(seconds=0.05, size=300, step=3)))
    assert [f["figure"] for f in figures] == [
        "witness_crypto_floor_per_s",
        "witness_add_checkpoint_per_s",
        "witness_add_checkpoint_nosync_per_s",
    ]
    for f in figures:
        assert f["bench"] == "witness" and f["unit"] == "checkpoints/s" and f["value"] > 0
    for f in figures[1:]:
        assert f["peer"] == "witness_crypto_floor_per_s"
        assert f["peer_value"] == figures[0]["value"]
        assert abs(f["ratio"] - f["value"] / figures[0]["value"]) < 0.01
