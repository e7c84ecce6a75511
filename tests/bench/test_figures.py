"""The figure record every benchmark yields (saihm.bench.figures)."""

from __future__ import annotations

import math
import os

from hypothesis import given
from hypothesis import strategies as st

from saihm.bench.figures import figure, load_average, percentile

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


def test_the_record_names_its_bench_and_keeps_the_extras(monkeypatch) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (1.234, 0.5, 0.0))
    fig = figure("store", "remember_per_s", 12.34567, "1/s", "floor", 2.0, True, cells=9)
    assert fig == {
        "bench": "store",
        "figure": "remember_per_s",
        "value": 12.346,
        "unit": "1/s",
        "peer": "floor",
        "peer_value": 2.0,
        "ratio": 6.173,
        "load_average": [1.23, 0.5, 0.0],
        "cells": 9,
    }


def test_every_record_carries_the_load_average_when_it_was_made(monkeypatch) -> None:
    """Issue 24 item 5: a figure is read beside the load it was measured under."""
    loads = iter([(3.5, 2.0, 1.0), (7.25, 4.0, 2.0)])
    monkeypatch.setattr(os, "getloadavg", lambda: next(loads))
    first = figure("recall", "a", 1.0, "ms", "p", 2.0, False)
    second = figure("recall", "b", 1.0, "ms", "p", 2.0, False)
    assert first["load_average"] == [3.5, 2.0, 1.0]
    assert second["load_average"] == [7.25, 4.0, 2.0]


def test_a_platform_without_a_load_average_gives_an_empty_one(monkeypatch) -> None:
    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert load_average() == []
    assert figure("store", "f", 1.0, "x/s", "p", 1.0, True)["load_average"] == []


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=200))
def test_a_percentile_lies_within_the_values(values) -> None:
    slack = 1e-9 * max(1.0, max(map(abs, values)))  # interpolation rounds in the last bit
    for q in (1, 50, 99):
        assert min(values) - slack <= percentile(values, q) <= max(values) + slack
    assert percentile(values, 1) <= percentile(values, 50) + slack
    assert percentile(values, 50) <= percentile(values, 99) + slack


def test_the_ceiling_with_the_committer_cpu_takes_its_cpu_time_for_the_hold() -> None:
    """``saihm bench store --store``: beside the ceiling from the measured lock hold, the one
    where the committer never waits for a core: its CPU time in the hold plus the commit
    floor, round trips moved to the given network as for the hold."""
    from saihm.bench.storescale import _cost_figures, ceiling

    spent = {
        "statements": 40.0,
        "round_trips": 20.0,
        "write_statements": 16.0,
        "locked_round_trips": 4.0,
        "write_transactions": 4.0,
        "lock_seconds": 0.040,  # 10 ms a transaction
        "lock_cpu_seconds": 0.008,  # of which 2 ms the committer's own CPU
        "elapsed_seconds": 1.0,
    }
    figures = {f["figure"]: f for f in _cost_figures(1, 32, spent, 0.05, 0.2, 0.5)}
    top = figures["ceiling_remember_per_s_postgresql_1_node"]
    assert top["value"] == round(ceiling(8, 10.0, 1.0, 0.05, 0.2), 1)
    assert top["lock_cpu_ms_per_transaction"] == 2.0
    assert top["value_with_committer_cpu"] == round(ceiling(8, 2.5, 1.0, 0.05, 0.2), 1)
    assert top["value_with_committer_cpu"] > top["value"]
