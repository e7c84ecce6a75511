"""``saihm serve``: its options, read also from ``SAIHM_<OPTION>`` and ``--config FILE``."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from saihm.commands.common import config_from, data_options, store_option
from saihm.config import Config
from saihm.errors import SaihmError

__all__ = ["PERSON_ACTIONS_RETIRED", "register"]

#: The one line ``--person-actions`` (or SAIHM_PERSON_ACTIONS, or the config file) now prints.
PERSON_ACTIONS_RETIRED = (
    "saihm: --person-actions is retired and does nothing: the person signs in at /me/ with a "
    "passkey and acts there by default; an agent's token never may (docs/authority.md)"
)


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``saihm serve``."""
    serve = commands.add_parser(
        "serve",
        help="run the operator (creates data, KEK, authority and log keys on first run)",
        parse_hook=_parse_with_settings,
    )
    data_options(serve)
    serve.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="listen port (default 8080)")
    serve.add_argument("--workers", type=int, default=1, help="processes sharing the port")
    serve.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate")
    serve.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    serve.add_argument(
        "--max-body",
        type=int,
        default=1 << 20,
        metavar="BYTES",
        help="largest accepted request body (default 1 MiB)",
    )
    _serve_policy(serve)
    serve.add_argument(
        "--rate-limit",
        type=float,
        metavar="PER_SECOND",
        help="calls per second each token may make, per worker (default 50; 0 disables)",
    )
    serve.add_argument(
        "--rate-burst",
        type=int,
        metavar="CALLS",
        help="calls a token may make at once before the rate applies (default 200)",
    )
    serve.add_argument(
        "--pending-max",
        type=int,
        metavar="N",
        help="pending memory proposals held per consumer (default 100)",
    )
    serve.add_argument(
        "--pending-ttl",
        type=int,
        metavar="SECONDS",
        help="lifetime of a pending memory proposal (default 604800, 7 days)",
    )
    serve.add_argument(
        "--origin",
        help="the log's identity, fixed when DIR is created (default: "
        "saihm.localhost/log/<8 hex of the log key hash>; see docs/formats.md)",
    )
    serve.add_argument(
        "--witness",
        dest="witnesses",
        action="append",
        type=_witness_option,
        metavar="URL=VKEY",
        help="submit each new checkpoint to this tlog-witness (submission URL and its "
        "verifier key; repeatable; default: none)",
    )
    serve.add_argument(
        "--map-size",
        type=int,
        metavar="BYTES",
        help="initial LMDB map size, at least 1 MiB (default 8 GiB); it doubles as needed",
    )
    serve.add_argument(
        "--map-size-max",
        type=int,
        metavar="BYTES",
        help="ceiling of the LMDB map; beyond it writes are refused with 503 (default 256 GiB)",
    )
    serve.add_argument(
        "--min-free-disk",
        type=int,
        metavar="BYTES",
        help="free bytes the data volume keeps; below it writes are refused with 503 "
        "(default 256 MiB; 0 disables)",
    )
    serve.add_argument(
        "--recall-cache-mb",
        type=int,
        default=None,
        metavar="MB",
        help="memory bound of the cache of verified cells, per process (default 256; 0 = off)",
    )
    serve.add_argument(
        "--embedding-model",
        metavar="DIR",
        type=_model_option,
        help="the sentence-embedding model of semantic ranking: a local Hugging Face / "
        "sentence-transformers folder (tokenizer.json, onnx/model.onnx), or 'none' for "
        "lexical ranking only (default: the bundled all-MiniLM-L6-v2, SHA-256 checked)",
    )
    serve.set_defaults(run=run)


def _parse_with_settings(
    parser: argparse.ArgumentParser, argv: Sequence[str], namespace: argparse.Namespace | None
) -> tuple[argparse.Namespace, list[str]]:
    """The command line over ``SAIHM_<OPTION>`` over the ``--config`` file over the defaults
    (saihm.commands.settings); nothing is left over for the parent parser."""
    from saihm.commands.settings import parse_with_settings

    return parse_with_settings(parser, list(argv), os.environ), []


def _policy_default(name: str) -> object:
    """The default of a Config policy field: the dataclass is the one place it is written."""
    (field,) = [f for f in dataclasses.fields(Config) if f.name == name]
    return field.default


def _serve_policy(serve: argparse.ArgumentParser) -> None:
    """The config file and the operator's published policy (saihm.config.Config fields)."""
    serve.add_argument(
        "--config",
        metavar="FILE",
        help="TOML file of serve options, keyed by the long option without '--' "
        "(also $SAIHM_CONFIG); every option is also $SAIHM_<OPTION>, e.g. SAIHM_TLS_CERT; "
        "command line > environment > file > default (docs/operations.md)",
    )
    onoff = argparse.BooleanOptionalAction
    for option, text in (
        ("--governance", "offer the governance tools"),
        ("--recall-receipts", "log a RECALL receipt per recall"),
        ("--status-receipts", "log a STATUS receipt per status"),
        (
            "--person-actions",
            "retired, does nothing: the person acts from /me/ with a passkey, and no agent "
            "token ever may (docs/authority.md)",
        ),
    ):
        default = _policy_default(option[2:].replace("-", "_"))
        serve.add_argument(option, action=onoff, default=default, help=text)
    serve.add_argument(
        "--checkpoint-interval",
        type=float,
        default=_policy_default("checkpoint_interval"),
        metavar="SECONDS",
        help="seconds between signed checkpoints while the log grows",
    )
    serve.add_argument(
        "--kek-rotation-hours",
        type=int,
        default=_policy_default("kek_rotation_hours"),
        metavar="HOURS",
        help="hours between KEK retirements (0: no schedule; governable)",
    )
    serve.add_argument(
        "--voting-window",
        type=int,
        default=_policy_default("voting_window"),
        metavar="SECONDS",
        help="how long a governance proposal stays open",
    )
    serve.add_argument(
        "--temporary-default-ttl",
        type=int,
        default=_policy_default("temporary_default_ttl"),
        metavar="SECONDS",
        help="TEMPORARY contract lifetime when none is given (governable)",
    )
    serve.add_argument(
        "--service-window-ms",
        type=int,
        default=_policy_default("service_window_ms"),
        metavar="MS",
        help="a call answered within this many ms counts as served in time (status prs)",
    )


def _witness_option(text: str) -> str:
    """``--witness URL=VKEY``, checked (saihm.witness.submit.parse_witness) and normalised."""
    from saihm.witness.submit import parse_witness

    try:
        return parse_witness(text).spec
    except SaihmError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


#: ``--embedding-model none``: no semantic stage (lexical ranking only).
NO_MODEL = "none"


def _model_option(text: str) -> Path | str:
    """``--embedding-model DIR`` as a path, or :data:`NO_MODEL`."""
    return NO_MODEL if text == NO_MODEL else Path(text)


def _settle_model(args: argparse.Namespace) -> None:
    """``args.embedding_model`` as Config takes it: the bundled model's folder when the option
    is not given (its files' SHA-256 checked now: a mismatch is one line and an exit, before
    anything is created), None for ``none``, else the folder named."""
    if args.embedding_model is None:
        from saihm.retrieval.bundled import bundled_model_dir

        args.embedding_model = bundled_model_dir()
    elif args.embedding_model == NO_MODEL:
        args.embedding_model = None


def run(args: argparse.Namespace) -> int:
    """Serve (saihm.http.serve) with the options as typed values."""
    from saihm.http.limits import SERVE_FIELDS
    from saihm.http.serve import POLICY_RANGES, ServeOptions, main
    from saihm.witness.submit import for_config

    store_option(args, os.environ)
    if getattr(args, "person_actions", False):
        print(PERSON_ACTIONS_RETIRED, file=sys.stderr, flush=True)
    _settle_model(args)
    return main(
        ServeOptions(
            data=args.data,
            store=args.store,
            host=args.host,
            port=args.port,
            workers=args.workers,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            max_body=args.max_body,
            policy={name: getattr(args, name, None) for name in POLICY_RANGES},
            limits={name: getattr(args, name, None) for name in SERVE_FIELDS},
            config=lambda: config_from(args),
            # The witness submitter is composed here, above the HTTP package that runs it.
            submitter=lambda operator: for_config(operator.store, operator.config),
        )
    )
