"""``saihm bench [NAME] [OPTIONS]``: the benchmarks (saihm.bench), one JSON line per figure.

Each line carries the figure, its floor or peer from the same run, their ratio and the load
average. Benchmarks are not tests: the command exits 0 whatever the figures say, and non-zero
only when a benchmark could not run (bad options, a missing extra, a failure of the code it
measures).

The options after NAME are parsed here, each benchmark's by its own :class:`Parser` (prog
``saihm bench NAME``, argparse's usage-and-error output), into the typed options its module
takes (``CryptoOptions``, ``RecallOptions``, ``StoreOptions``, ...), whose defaults the parser
shows (``recall`` and ``witness`` keep the help text they have always had, without them).
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from saihm.commands.common import Parser

if TYPE_CHECKING:
    from saihm.bench.crypto import CryptoOptions
    from saihm.bench.http import HttpOptions
    from saihm.bench.recall import RecallOptions
    from saihm.bench.store import StoreOptions
    from saihm.bench.translog import TranslogOptions
    from saihm.bench.verify import VerifyOptions
    from saihm.bench.witness import WitnessOptions

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


def _parser(name: str, **kwargs: Any) -> Parser:
    return Parser(prog=f"saihm bench {name}", one_line_errors=False, **kwargs)


def _crypto(argv: list[str]) -> CryptoOptions:
    from saihm.bench.crypto import CryptoOptions as Options

    parser = _parser("crypto")
    parser.add_argument("--seconds", type=float, default=Options.seconds)
    parser.add_argument("--content-bytes", type=int, default=Options.content_bytes)
    return Options(**vars(parser.parse_args(argv)))


def _http(argv: list[str]) -> HttpOptions:
    from saihm.bench.http import HttpOptions as Options

    parser = _parser("http")
    parser.add_argument(
        "--seconds", type=float, default=Options.seconds, help="seconds per throughput phase"
    )
    parser.add_argument("--n", type=int, default=Options.n, help="recall calls per phase")
    parser.add_argument(
        "--concurrency", type=int, default=Options.concurrency, help="concurrent callers"
    )
    parser.add_argument(
        "--cells", type=int, default=Options.cells, help="cells in the recalled session"
    )
    opts = Options(**vars(parser.parse_args(argv)))
    if (problem := opts.problem()) is not None:
        parser.error(problem)
    return opts


def _model_or_none(text: str) -> str | None:
    """``--embedding-model``: a model folder, or ``none`` for none (as ``saihm serve`` takes
    it): the lexical figures only, as without the option."""
    return None if text == "none" else text


def _recall(argv: list[str]) -> RecallOptions:
    from saihm.bench.recall import RecallOptions as Options

    # Its --help has always been argparse's own (no defaults stated); kept as it was. Counts
    # that would measure nothing are refused by the benchmark itself, in one line, before
    # any work (saihm.bench.recall._check).
    parser = _parser("recall", formatter_class=argparse.HelpFormatter)
    parser.add_argument("--sizes", default=Options.sizes, help="store sizes, comma-separated")
    parser.add_argument(
        "--samples", type=int, default=Options.samples, help="warm recalls timed per figure"
    )
    parser.add_argument(
        "--cold", type=int, default=Options.cold, help="cold recalls timed per figure"
    )
    parser.add_argument(
        "--cache-dir", default=Options.cache_dir, help="where built stores are kept for later runs"
    )
    parser.add_argument("--workers", type=int, default=Options.workers, help="signing processes")
    parser.add_argument(
        "--cache-mb", type=int, default=Options.cache_mb, help="cache bound while timing"
    )
    parser.add_argument(
        "--embedding-model",
        type=_model_or_none,
        help="also measure quality with this local model",
    )
    parser.add_argument("--skip-latency", action="store_true", help="quality figures only")
    parser.add_argument(
        "--conversations", type=int, default=None, help="use only the first N conversations"
    )
    parser.add_argument(
        "--locomo",
        metavar="DIR",
        help="also measure LoCoMo from this folder (its *.json or *.zip; read, never copied)",
    )
    parser.add_argument(
        "--sets",
        default=Options.sets,
        help="shipped quality sets to run, comma-separated (saihm/bench/sets/)",
    )
    return Options(**vars(parser.parse_args(argv)))


def _store(argv: list[str]) -> StoreOptions:
    from saihm.bench.store import StoreOptions as Options

    parser = _parser("store")
    parser.add_argument(
        "--cells", type=int, default=Options.cells, help="cells in the recall store"
    )
    parser.add_argument(
        "--sessions", type=int, default=Options.sessions, help="sessions the cells span"
    )
    parser.add_argument(
        "--events", type=int, default=Options.events, help="minimum log size to rebuild"
    )
    parser.add_argument(
        "--seconds", type=float, default=Options.seconds, help="per throughput figure"
    )
    parser.add_argument(
        "--threads", type=int, default=Options.threads, help="threads for the second figure"
    )
    parser.add_argument(
        "--samples", type=int, default=Options.samples, help="session recalls to time"
    )
    parser.add_argument(
        "--top-cells",
        type=int,
        default=Options.top_cells,
        metavar="N",
        help="also fill a store of N cells through saihm_remember (many minutes for 100,000) "
        "and time holder-wide top-20 recalls over it; 0: off",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        default=Options.store,
        help="measure the scaling figures instead: remember/s of 1 and 2 operator processes on "
        "LMDB and on this PostgreSQL database, and the cost of one commit (scratch schemas, "
        "dropped afterwards; saihm/bench/storescale.py)",
    )
    parser.add_argument(
        "--node-threads",
        type=int,
        default=Options.node_threads,
        help="with --store: threads per operator process",
    )
    parser.add_argument(
        "--commit-samples",
        type=int,
        default=Options.commit_samples,
        help="with --store: commits timed per figure",
    )
    parser.add_argument(
        "--round-trip-ms",
        type=float,
        default=Options.round_trip_ms,
        help="with --store: the network round trip to the database the ceiling is computed for",
    )
    return Options(**vars(parser.parse_args(argv)))


def _translog(argv: list[str]) -> TranslogOptions:
    from saihm.bench.translog import TranslogOptions as Options

    parser = _parser("translog")
    parser.add_argument("--leaves", type=int, default=Options.leaves)
    parser.add_argument("--samples", type=int, default=Options.samples)
    return Options(**vars(parser.parse_args(argv)))


def _verify(argv: list[str]) -> VerifyOptions:
    from saihm.bench.verify import VerifyOptions as Options

    parser = _parser("verify")
    parser.add_argument("--receipts", type=int, default=Options.receipts)
    parser.add_argument("--holders", type=int, default=Options.holders)
    parser.add_argument("--workers", type=int, default=Options.workers)
    return Options(**vars(parser.parse_args(argv)))


def _witness(argv: list[str]) -> WitnessOptions:
    from saihm.bench.witness import WitnessOptions as Options

    # Its --help has always been argparse's own (no defaults stated); kept as it was.
    parser = _parser("witness", formatter_class=argparse.HelpFormatter)
    parser.add_argument("--seconds", type=float, default=Options.seconds)
    parser.add_argument("--size", type=int, default=Options.size)
    parser.add_argument("--step", type=int, default=Options.step)
    return Options(**vars(parser.parse_args(argv)))


#: Each benchmark whose options are parsed here: its words in, its typed options out.
PARSED: dict[str, Callable[[list[str]], Any]] = {
    "crypto": _crypto,
    "http": _http,
    "recall": _recall,
    "store": _store,
    "translog": _translog,
    "verify": _verify,
    "witness": _witness,
}


def figures(name: str, argv: list[str]) -> Iterator[dict]:
    """The figures of benchmark ``name`` run with the options ``argv`` (parsed first: bad
    options exit 2 before anything is measured)."""
    module = importlib.import_module(f"saihm.bench.{name}")
    return module.run(PARSED[name](argv))


def run(args: argparse.Namespace) -> int:
    """Run one benchmark, or all, passing on the options after its name; 0 whatever the
    figures (none is compared with its target here)."""
    from saihm.bench.figures import load_average

    for name in [args.name] if args.name else _bench_names():
        for figure in figures(name, args.rest):
            figure.setdefault("load_average", load_average())  # a record not made by figure()
            print(json.dumps(figure), flush=True)
    return 0
