"""The ``saihm`` command line (DESIGN.md "Command line")."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; each subcommand registers itself here."""
    parser = argparse.ArgumentParser(
        prog="saihm",
        description="A custodial SAIHM operator for AI-agent memory with a public Merkle log.",
    )
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``saihm`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
