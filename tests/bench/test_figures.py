"""The figure record every benchmark yields (saihm.bench.figures)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from saihm.bench.figures import figure, percentile

positive = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False)


@given(value=positive, peer=positive, higher=st.booleans())
def test_the_ratio_is_above_one_exactly_when_the_value_is_better(value, peer, higher) -> None:
    fig = figure("store", "f", value, "x/s", "peer", peer, higher)
    better = value > peer if higher else value < peer
    exact = value / peer if higher else peer / value
    assert math.isclose(fig["ratio"], round(exact, 3))
    if abs(exact - 1) > 0.01:
        assert (fig["ratio"] > 1) == better


def test_a_zero_value_gives_the_limit_not_a_division_error() -> None:
    assert figure("recall", "f", 0, "ms", "p", 5, False)["ratio"] == math.inf
    assert figure("recall", "f", 0, "x/s", "p", 5, True)["ratio"] == 0.0


def test_the_record_names_its_bench_and_keeps_the_extras() -> None:
    fig = figure("store", "remember_per_s", 12.34567, "1/s", "floor", 2.0, True, cells=9)
    assert fig == {
        "bench": "store",
        "figure": "remember_per_s",
        "value": 12.346,
        "unit": "1/s",
        "peer": "floor",
        "peer_value": 2.0,
        "ratio": 6.173,
        "cells": 9,
    }


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=200))
def test_a_percentile_lies_within_the_values(values) -> None:
    slack = 1e-9 * max(1.0, max(map(abs, values)))  # interpolation rounds in the last bit
    for q in (1, 50, 99):
        assert min(values) - slack <= percentile(values, q) <= max(values) + slack
    assert percentile(values, 1) <= percentile(values, 50) + slack
    assert percentile(values, 50) <= percentile(values, 99) + slack
