"""The ``saihm`` command line (DESIGN.md "Command line", pinned): the parser tree and the one
place a command's error is printed.

Every command works whether or not a server runs on the same data directory: LMDB is
multi-process, and each command reads state inside its own transaction. Bad input gets one
line on stderr and a non-zero exit; JSON goes to stdout where the design pins it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from saihm import __version__
from saihm.commands import (
    admin,
    audit,
    authority,
    backup,
    bench,
    host,
    memory,
    migrate,
    person,
    publish,
    serve,
)
from saihm.commands import witness as witness_commands
from saihm.commands.common import Parser, config_from
from saihm.errors import CommandError, SaihmError

__all__ = ["EXTRAS", "Parser", "build_parser", "config_from", "main", "subparser"]

EPILOG = """first steps:
  saihm serve --data ./saihm-data            run the operator on 127.0.0.1:8080
  saihm holder create --data ./saihm-data    make a holder; prints its token
  curl -s http://127.0.0.1:8080/ -H "Authorization: Bearer $TOKEN" \\
       -d '{"method":"saihm_status","params":{}}'
  saihm grant --data ./saihm-data --holder H --sessions all --ttl 604800
                                             a token that recalls across all sessions for a week
  saihm mcp-config --host claude-desktop     an MCP host config for saihm-mcp
"""

#: The command families, in the order ``saihm --help`` lists their commands.
FAMILIES = (
    serve,
    admin,
    person,
    backup,
    migrate,
    host,
    authority,
    audit,
    publish,
    memory,
    witness_commands,
    bench,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every pinned command."""
    parser = Parser(
        prog="saihm",
        description="A custodial SAIHM operator for AI-agent memory with a public Merkle log.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"saihm {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for family in FAMILIES:
        family.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``saihm`` console script."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        code: int = args.run(args)
        return code
    except SystemExit as done:
        # argparse's own exits (--help: 0, bad usage: 2) become return codes.
        return done.code if isinstance(done.code, int) else 2
    except SaihmError as err:
        from saihm.storage.hint import with_store
        from saihm.storage.url import scrub

        # A store URL may carry a password: no message shows it, whoever wrote the message.
        url = _store_url(argv)
        print(f"saihm: error: {with_store(scrub(str(err), url), url)}", file=sys.stderr)
        return err.exit_code if isinstance(err, CommandError) else 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return quiet_broken_pipe()
    except ModuleNotFoundError as err:
        hint = missing_extra(err)
        if hint is None:
            raise
        print(f"saihm: error: {hint}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"saihm: error: {os_error_text(err)}", file=sys.stderr)
        return 2
    except Exception as err:
        # A bug, not bad input: say so in one line; SAIHM_DEBUG=1 shows the traceback.
        if os.environ.get("SAIHM_DEBUG"):
            raise
        print(
            f"saihm: internal error ({type(err).__name__}); rerun with SAIHM_DEBUG=1",
            file=sys.stderr,
        )
        return 70


def _store_url(argv: list[str]) -> str | None:
    """The store URL a command line names (``--store`` or ``--to``) or $SAIHM_STORE."""
    from saihm.storage.url import ENV

    for i, arg in enumerate(argv):
        for option in ("--store", "--to"):
            if arg == option and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(option + "="):
                return arg.split("=", 1)[1]
    return os.environ.get(ENV)


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of the subcommand ``name``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise KeyError(name)


#: The optional extras, by the top-level module each one installs.
EXTRAS = {
    "pqcrypto": "audit",
    "pymerkle": "bench",
    "rank_bm25": "bench",
    "boto3": "s3",
    "psycopg": "postgresql",
    "psycopg_pool": "postgresql",
}


def missing_extra(err: ModuleNotFoundError) -> str | None:
    """A one-line install hint when ``err`` is a module of an optional extra, else None."""
    top = (err.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"this needs the optional {top} package: pip install 'saihm[{extra}]'"


def os_error_text(err: OSError) -> str:
    """One line for an OS error: what failed and on which file, without ``[Errno N]``."""
    from saihm.errors import os_message

    return os_message(err)


def quiet_broken_pipe() -> int:
    """The reader of our stdout went away (``saihm ... | head``): stop quietly, exit 141 as a
    shell does for SIGPIPE, and keep Python from complaining while it flushes stdout."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 141


if __name__ == "__main__":
    sys.exit(main())
