"""The figure record every benchmark yields, and the percentile they report (saihm.bench).

Each record carries its floor or peer measured (or stated) in the same run and the machine's
load average when it was made: on a shared machine absolute figures move with the load, so a
figure is read as its ratio to its peer, beside the load it was measured under.
"""

from __future__ import annotations

import os
import statistics


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages now (``os.getloadavg``), rounded to 0.01; empty
    where the platform reports none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return []


def figure(
    bench: str,
    name: str,
    value: float,
    unit: str,
    peer: str,
    peer_value: float,
    higher_is_better: bool,
    **extra: object,
) -> dict:
    """One JSON-ready figure: ``value`` against ``peer_value`` measured in the same run, with
    the :func:`load_average` at the time (``load_average``).

    ``ratio`` is above 1 when ``value`` is the better of the two. A zero ``value`` gives the
    limit rather than a division error: 0 when higher is better, infinity when lower is; so
    does a zero ``peer_value`` (infinity when higher is better).
    """
    if value == 0:
        ratio = 0.0 if higher_is_better else float("inf")
    elif peer_value == 0:  # a peer that scored nothing (a quality figure): the limit again
        ratio = float("inf") if higher_is_better else 0.0
    else:
        ratio = value / peer_value if higher_is_better else peer_value / value
    return {
        "bench": bench,
        "figure": name,
        "value": round(value, 3),
        "unit": unit,
        "peer": peer,
        "peer_value": round(peer_value, 3),
        "ratio": round(ratio, 3),
        "load_average": load_average(),
        **extra,
    }


def percentile(values: list[float], q: int) -> float:
    """The ``q``-th percentile (1..99) of ``values``, inclusive method; one value is itself."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]
