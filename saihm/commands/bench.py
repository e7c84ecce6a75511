"""``saihm bench [NAME] [OPTIONS]``: the benchmarks (saihm.bench), one JSON line per figure.

Each line carries the figure, its floor or peer from the same run, their ratio and the load
average. Benchmarks are not tests: the command exits 0 whatever the figures say, and non-zero
only when a benchmark could not run (bad options, a missing extra, a failure of the code it
measures).
"""

from __future__ import annotations

import argparse
import importlib
import json

__all__ = ["register"]


def _bench_names() -> tuple[str, ...]:
    from saihm.bench import NAMES

    return NAMES


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``saihm bench``."""
    bench = commands.add_parser(
        "bench",
        help="measure speed against peers and floors in one run (JSON lines)",
        description="Print one JSON object per figure, with its floor or peer from the same "
        "run, the ratio and the load average. Exits 0 whatever the figures (benchmarks are not "
        "tests); non-zero only when a benchmark could not run.",
    )
    bench.add_argument(
        "name", nargs="?", choices=_bench_names(), help="one benchmark (default all)"
    )
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the benchmark")
    bench.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run one benchmark, or all, passing on the options after its name; 0 whatever the
    figures (none is compared with its target here)."""
    from saihm.bench.figures import load_average

    for name in [args.name] if args.name else _bench_names():
        module = importlib.import_module(f"saihm.bench.{name}")
        for figure in module.run(args.rest):
            figure.setdefault("load_average", load_average())  # a record not made by figure()
            print(json.dumps(figure), flush=True)
    return 0
