"""``saihm bench crypto`` yields its four figures in the shared shape."""

from __future__ import annotations

from saihm.bench.crypto import CryptoOptions, run


def test_bench_crypto_figures():
    figures = list(run(CryptoOptions(seconds=0.01, content_bytes=8)))
    assert [f["figure"] for f in figures] == [
        "mldsa65_sign_per_s",
        "mldsa65_verify_per_s",
        "seal_sign_cells_per_s",
        "open_verify_cells_per_s",
    ]
    for f in figures:
        assert f["bench"] == "crypto" and f["unit"] == "ops/s" and f["value"] > 0
    assert figures[2]["peer"] == "mldsa65_sign_per_s"
    # Values are rounded for printing; the ratio is computed before rounding.
    assert abs(figures[2]["ratio"] - figures[2]["value"] / figures[0]["value"]) < 0.01
    assert figures[3]["peer_value"] == figures[1]["value"]
