"""``saihm witness serve``: run a C2SP tlog-witness (saihm.services.witness)."""

from __future__ import annotations

import argparse

from saihm.errors import SaihmError

__all__ = ["register"]

_USAGE = "usage: saihm witness serve --state DIR --log VKEY [...]"


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``saihm witness`` and its one action, ``serve``."""
    witness = commands.add_parser(
        "witness",
        help="run a C2SP tlog-witness: 'saihm witness serve --state DIR --log VKEY'",
        help_text=f"{_USAGE}\n\nRun a C2SP tlog-witness; see 'saihm witness serve --help'.\n",
    )
    witness.set_defaults(run=_usage)
    actions = witness.add_subparsers(dest="sub", metavar="ACTION")
    serve = actions.add_parser(
        "serve",
        formatter_class=argparse.HelpFormatter,
        description="Run a C2SP tlog-witness: POST /add-checkpoint cosigns checkpoints of the "
        "configured logs that are consistent with the last one it cosigned (per origin, kept "
        "on disk). Prints its verifier key on start.",
    )
    serve.add_argument(
        "--state",
        required=True,
        metavar="DIR",
        help="state directory (per-origin heads, evidence; the key by default)",
    )
    serve.add_argument(
        "--key",
        metavar="FILE",
        help="the witness's private key (default: DIR/witness.key; created, "
        "mode 0600, on first run)",
    )
    serve.add_argument(
        "--name",
        help="the witness's key name on first run (default: "
        "witness.localhost/<8 hex of the key hash>)",
    )
    serve.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="VKEY",
        help="a log verifier key <origin>+<id>+<base64> (repeatable; the key "
        "name is the log's origin)",
    )
    serve.add_argument(
        "--logs-file",
        metavar="FILE",
        help="a file of log verifier keys, one per line (e.g. a data "
        "directory's checkpoint-verifier-keys.txt)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=7380, help="listen port (default 7380; 0 picks a free one)"
    )
    serve.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate")
    serve.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    serve.set_defaults(run=_serve)


def _usage(args: argparse.Namespace) -> int:
    """``saihm witness`` without an action."""
    raise SaihmError(f"{_USAGE} (see saihm witness serve --help)")


def _serve(args: argparse.Namespace) -> int:
    from saihm.services.witness import WitnessOptions, serve

    return serve(
        WitnessOptions(
            state=args.state,
            key=args.key,
            name=args.name,
            log=tuple(args.log),
            logs_file=args.logs_file,
            host=args.host,
            port=args.port,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
        )
    )
