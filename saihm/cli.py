"""The ``saihm`` command line (DESIGN.md "Command line")."""

from __future__ import annotations

import argparse
import importlib
import json
import sys


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; each subcommand registers itself here."""
    parser = argparse.ArgumentParser(
        prog="saihm",
        description="A custodial SAIHM operator for AI-agent memory with a public Merkle log.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    bench = commands.add_parser(
        "bench",
        help="measure speed against peers and floors in one run (JSON lines)",
        description="Print one JSON object per figure, with the peer figure and the ratio.",
    )
    bench.add_argument(
        "name", nargs="?", choices=_bench_names(), help="one benchmark (default: all)"
    )
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the benchmark")
    bench.set_defaults(handler=_cmd_bench)
    return parser


def _bench_names() -> tuple[str, ...]:
    from saihm.bench import NAMES

    return NAMES


def _cmd_bench(args: argparse.Namespace) -> int:
    for name in [args.name] if args.name else _bench_names():
        module = importlib.import_module(f"saihm.bench.{name}")
        for figure in module.run(args.rest):
            print(json.dumps(figure), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``saihm`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
