"""The verifier's commands: ``export``, ``verify``, ``monitor``, ``replay`` and ``mirror``
(saihm.audit does the work, given typed options)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from saihm.errors import SaihmError

if TYPE_CHECKING:
    from saihm.audit.run import VerifyOptions

__all__ = ["parse_verify", "register"]


def register(commands: argparse._SubParsersAction) -> None:
    """Add the audit commands."""
    _export(commands)
    _verify(commands)
    _monitor(commands)
    _replay(commands)
    _mirror(commands)


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="URL",
        help="with --data: the data directory's PostgreSQL store (also $SAIHM_STORE; default: "
        "its LMDB store in DIR/lmdb; docs/scaling.md)",
    )


def _witness_options(parser: argparse.ArgumentParser) -> None:
    """``--witness VKEY`` (repeatable) and ``--min-witnesses N`` (verify and monitor)."""
    parser.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="VKEY",
        help="a witness verifier key (type 0x04 cosignature/v1 or 0x06 ML-DSA-44; "
        "repeatable; a witness may be given both of its keys, one option each)",
    )
    parser.add_argument(
        "--min-witnesses",
        type=int,
        default=None,
        metavar="N",
        help="fail unless at least N of the --witness witnesses cosigned (a witness given "
        "with two keys counts once, either key's line will do; default 1 with --witness)",
    )


def _witness_policy(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> int:
    """Check ``--witness``/``--min-witnesses`` (a usage error exits 2); return N."""
    from saihm.translog.witness import group_witness_keys, witness_verifier

    if opts.min_witnesses is not None and not opts.witness:
        parser.error("--min-witnesses needs --witness")
    verifiers = []
    for key in opts.witness:
        try:
            verifiers.append(witness_verifier(key))
        except SaihmError as err:
            parser.error(f"--witness {key[:40]}: {err}")
    try:
        witnesses = group_witness_keys(verifiers)
    except SaihmError as err:
        parser.error(f"--witness: {err}")
    need = 1 if opts.min_witnesses is None else opts.min_witnesses
    if opts.witness and not 0 <= need <= len(witnesses):
        parser.error("--min-witnesses must be 0..the number of --witness witnesses")
    return need


def _export(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "export",
        help="write a self-contained audit bundle (no plaintext, no keys)",
        one_line_errors=False,
        description="Write a self-contained audit bundle (docs/formats.md §5), streamed in bounded "
        "memory: every leaf, "
        "checkpoint, the log's verifier keys, the authority public key and the published "
        "erasure list and tallies. No plaintext, DEK, KEK, seed, token or session tag.",
    )
    parser.add_argument("--data", required=True, help="the operator's data directory")
    parser.add_argument("--out", required=True, help="bundle file to write")
    parser.add_argument(
        "--with-cells",
        action="store_true",
        help="include stored cells and contracts (wire CBOR, ciphertext only)",
    )
    _store_option(parser)
    parser.set_defaults(run=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    from saihm.audit.run import ExportOptions, export

    return export(
        ExportOptions(data=args.data, out=args.out, with_cells=args.with_cells, store=args.store)
    )


def _verify(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "verify",
        help="verify a bundle, mirror, live log or data directory without trusting the operator",
        one_line_errors=False,
        description="Verify a log without trusting the operator: an audit bundle (FILE), a "
        "mirror or publication directory (DIR, as saihm mirror or saihm publish write it), a "
        "live log (URL: an operator's base URL or a tlog-tiles prefix), or a data directory "
        "(--data, read-only; also checks the operator's private state: projections against a "
        "rebuild, record MACs, cells, keys, seeds, pending proposals; needs the KEK "
        "directory). Exit 0 only when every check holds.",
    )
    parser.add_argument(
        "source",
        nargs="?",
        metavar="FILE|DIR|URL",
        help="audit bundle, mirror directory or log URL",
    )
    parser.add_argument("--data", help="verify a data directory directly (read-only)")
    parser.add_argument("--trust", help="file of pinned checkpoint verifier keys, one per line")
    parser.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="NOTE",
        help="an externally held signed checkpoint (repeatable)",
    )
    parser.add_argument(
        "--second-implementation",
        action="store_true",
        help="re-verify every signature with pqcrypto (bundles only)",
    )
    parser.add_argument("--workers", type=int, default=1, help="signature-check processes")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--kek-dir",
        metavar="DIR",
        help="with --data: the KEK directory for the private checks (default: DIR/../kek)",
    )
    parser.add_argument(
        "--log-keys-dir",
        metavar="DIR",
        help="with --data: the log's signing keys, needed to open the store (default: "
        "DIR/log-keys)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    _store_option(parser)
    _witness_options(parser)
    parser.set_defaults(run=lambda args: _run_verify(parser, args))


def _run_verify(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from saihm.audit.run import verify
    from saihm.offline.fsck import private_check

    return verify(_verify_options(parser, args), private=private_check)


def parse_verify(argv: list[str]) -> VerifyOptions:
    """The options ``saihm verify ARGV`` would run with (a usage error exits 2)."""
    from saihm.commands.common import Parser

    top = Parser(prog="saihm")
    commands = top.add_subparsers(dest="command")
    _verify(commands)
    return _verify_options(commands.choices["verify"], top.parse_args(["verify", *argv]))


def _verify_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> VerifyOptions:
    from saihm.audit.run import VerifyOptions

    need = _witness_policy(parser, args)
    if (args.source is None) == (args.data is None):
        parser.error("give exactly one of FILE|DIR|URL or --data DIR")
    options = VerifyOptions(
        source=args.source,
        data=args.data,
        trust=args.trust,
        checkpoint=tuple(args.checkpoint),
        second_implementation=args.second_implementation,
        workers=args.workers,
        json=args.json,
        kek_dir=args.kek_dir,
        log_keys_dir=args.log_keys_dir,
        no_progress=args.no_progress,
        store=args.store,
        witness=tuple(args.witness),
        min_witnesses=need,
    )
    return options


def _monitor(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "monitor",
        help="keep a verified mirror of a log and report rollbacks and forks",
        one_line_errors=False,
        description="Keep a verified mirror of a SAIHM log (every entry, tile and checkpoint) "
        "and alarm on rollback, fork, bad signature, a failed check, a stale log or a log that "
        "cannot be read. With --once, exit 1 on any alarm and 2 on the monitor's own bad "
        "configuration (then it contacts nobody).",
    )
    parser.add_argument("url", help="the operator's base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--state", required=True, help="state directory: a mirror directory")
    parser.add_argument(
        "--trust", help="pin these verifier keys at first contact (file; default: the log's own)"
    )
    parser.add_argument(
        "--interval", type=float, default=60.0, help="seconds between rounds (default 60)"
    )
    parser.add_argument("--once", action="store_true", help="one round; exit 1 on any alarm")
    parser.add_argument(
        "--max-stale",
        type=float,
        default=300.0,
        metavar="S",
        help="alarm when leaves stay beyond the checkpoint this long (default 300)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="signature-check processes (default 1)"
    )
    _witness_options(parser)
    parser.set_defaults(run=lambda args: _run_monitor(parser, args))


def _run_monitor(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from saihm.audit.monitor import MonitorOptions, run

    need = _witness_policy(parser, args)
    return run(
        MonitorOptions(
            url=args.url,
            state=args.state,
            trust=args.trust,
            interval=args.interval,
            once=args.once,
            max_stale=args.max_stale,
            workers=args.workers,
            witness=tuple(args.witness),
            min_witnesses=need,
        )
    )


def _replay(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "replay",
        help="turn a log (bundle, mirror or URL) into a dataset to study, verified first",
        one_line_errors=False,
        description="Replay a log as a stranger has it: an audit bundle (FILE), a mirror or "
        "publication directory (DIR) or a log URL. Everything is verified first, as saihm "
        "verify does (signatures, tiles, checkpoints); a URL is mirrored into "
        "DIR/.saihm-replay/log. --format parquet|csv|jsonl writes the research dataset "
        "(events, memories, shares; docs/formats.md section 8) and a second run into the "
        "same DIR appends only what the log added; --format lmdb writes the public "
        "projections into a new DIR. Exit 0 when written, 1 when a check failed (nothing "
        "written), 2 when SOURCE cannot be read.",
    )
    parser.add_argument("source", metavar="FILE|DIR|URL", help="audit bundle, mirror or log URL")
    parser.add_argument("--out", required=True, help="the output directory")
    parser.add_argument(
        "--format",
        choices=("lmdb", "parquet", "csv", "jsonl"),
        default="lmdb",
        help="parquet needs pip install 'saihm[research]' (default: lmdb)",
    )
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help='skip every check (the summary says "verified": false)',
    )
    parser.add_argument(
        "--trust",
        metavar="FILE",
        help="pin these checkpoint verifier keys (default: the log's own, as saihm verify)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="signature-check processes (default 1)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(run=_run_replay)


def _run_replay(args: argparse.Namespace) -> int:
    from saihm.audit.replay import ReplayOptions, run

    return run(
        ReplayOptions(
            source=args.source,
            out=args.out,
            format=args.format,
            no_progress=args.no_progress,
            verify=not args.no_verify,
            trust=args.trust,
            workers=args.workers,
        )
    )


def _mirror(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "mirror",
        help="copy a tiled log into a directory, verifying everything (incremental)",
        one_line_errors=False,
        description="Mirror a tiled log (a running saihm serve, or a saihm publish directory "
        "behind any static server) into DIR, verifying every receipt, tile and checkpoint; "
        "incremental and resumable. DIR is itself a servable tlog-tiles log. Exit 0 when "
        "everything verified, 1 on an alarm (rollback, fork, a failed check), 2 when the log "
        "cannot be read or the options are wrong.",
    )
    parser.add_argument("url", help="the log: an operator's base URL or a tlog-tiles prefix")
    parser.add_argument("dir", help="the mirror directory (created if new)")
    parser.add_argument(
        "--trust",
        metavar="FILE",
        help="pin these checkpoint verifier keys at "
        "first contact (default: none; the log's own v1/keys, reported as not "
        "pinned)",
    )
    parser.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="NOTE",
        help="a signed checkpoint held elsewhere (repeatable; default: none)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="signature-check processes (default 1)"
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(run=_run_mirror)


def _run_mirror(args: argparse.Namespace) -> int:
    from saihm.audit.mirror import MirrorOptions, run

    return run(
        MirrorOptions(
            url=args.url,
            dir=args.dir,
            trust=args.trust,
            checkpoint=tuple(args.checkpoint),
            workers=args.workers,
            json=args.json,
            no_progress=args.no_progress,
        )
    )
