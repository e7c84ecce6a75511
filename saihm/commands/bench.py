"""``saihm bench [NAME] [OPTIONS]``: the benchmarks (saihm.bench), one JSON line per figure."""

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
        description="Print one JSON object per figure, with the peer figure and the ratio.",
    )
    bench.add_argument(
        "name", nargs="?", choices=_bench_names(), help="one benchmark (default all)"
    )
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the benchmark")
    bench.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run one benchmark, or all, passing on the options after its name."""
    for name in [args.name] if args.name else _bench_names():
        module = importlib.import_module(f"saihm.bench.{name}")
        for figure in module.run(args.rest):
            print(json.dumps(figure), flush=True)
    return 0
