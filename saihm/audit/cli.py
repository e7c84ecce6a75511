"""``saihm export | verify | monitor | replay``: argument parsing and output for the audit layer.

Each function takes the namespace of ``saihm.cli`` whose ``rest`` holds the remaining argv, parses
it with its own parser (so ``--help`` works) and returns the exit code: 0 only on success, 1 when
a check failed, 2 for bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from saihm.audit.witnessopts import add_witness_options, check_witnesses, witness_policy
from saihm.errors import NotFound, SaihmError, message
from saihm.helpformat import DefaultsFormatter

if TYPE_CHECKING:
    from saihm.audit.progress import Progress
    from saihm.audit.report import Report

__all__ = ["export", "mirror", "monitor", "replay", "verify"]


def _rest(args: argparse.Namespace | list[str]) -> list[str]:
    if isinstance(args, list):
        return args
    return [a for a in getattr(args, "rest", []) if a != "--"]


def _keys_file(path: str) -> list[str]:
    """Verifier keys ``<name>+<hash>+<base64>``, one per line (blank lines and # ignored)."""
    lines = Path(path).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="URL",
        help="with --data: the data directory's PostgreSQL store (also $SAIHM_STORE; default: "
        "its LMDB store in DIR/lmdb; docs/scaling.md)",
    )


def _store(opts: argparse.Namespace) -> str | None:
    """``--store``, else ``$SAIHM_STORE`` (with ``--data`` only), checked; None for LMDB."""
    import os

    from saihm.storeurl import ENV, check_store_url

    if getattr(opts, "data", None) is None:
        if opts.store is not None:
            raise SaihmError("--store goes with --data DIR")
        return None
    opts.store = opts.store or os.environ.get(ENV) or None
    if opts.store is None:
        from saihm.storeurl import refuse_migrated

        refuse_migrated(Path(opts.data))
        return None
    return check_store_url(opts.store)


def _scrub(text: str, opts: argparse.Namespace) -> str:
    from saihm.storehint import with_store
    from saihm.storeurl import scrub

    store = getattr(opts, "store", None)
    return with_store(scrub(text, store), store)


def export(args: argparse.Namespace | list[str]) -> int:
    """``saihm export --data DIR --out FILE [--with-cells]``."""
    parser = argparse.ArgumentParser(
        prog="saihm export",
        formatter_class=DefaultsFormatter,
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
    opts = parser.parse_args(_rest(args))
    from saihm.audit.export import stream_bundle

    try:
        store = _store(opts)
        written = stream_bundle(opts.data, opts.out, with_cells=opts.with_cells, store=store)
    except (SaihmError, OSError) as err:
        print(f"saihm export: {_scrub(message(err), opts)}", file=sys.stderr)
        return 2
    for index, what in written.pop("problems"):
        print(f"saihm export: warning: leaf {index}: {what}", file=sys.stderr)
    print(json.dumps({"out": opts.out, **written}))
    return 0


def verify(args: argparse.Namespace | list[str], private: PrivateCheck | None = None) -> int:
    """``saihm verify FILE|DIR|URL | --data DIR [--trust KEYFILE] [--checkpoint NOTE]... ...``.

    ``private`` is the operator's private-state check (saihm/fsck.py, injected by saihm/cli.py
    so this layer imports nothing of the store): with ``--data`` it is called with the parsed
    options and a progress-task factory and returns a summary and its findings
    ``(database, key, check, what)``, each recorded as a failure.
    """
    parser = argparse.ArgumentParser(
        prog="saihm verify",
        formatter_class=DefaultsFormatter,
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
    add_witness_options(parser)
    opts = parser.parse_args(_rest(args))
    need = witness_policy(parser, opts)
    if (opts.source is None) == (opts.data is None):
        parser.error("give exactly one of FILE|DIR|URL or --data DIR")
    if opts.second_implementation and importlib.util.find_spec("pqcrypto") is None:
        hint = "--second-implementation needs the optional pqcrypto package"
        print(f"saihm verify: {hint}: pip install 'saihm[audit]'", file=sys.stderr)
        return 2

    source = opts.source
    is_log = source is not None and (
        source.startswith(("http://", "https://")) or Path(source, "checkpoint").is_file()
    )
    if source is not None and not is_log and Path(source, "lmdb").is_dir():
        print(f"saihm verify: {source} is a data directory: use --data {source}", file=sys.stderr)
        return 2
    try:
        _store(opts)
        trusted = _keys_file(opts.trust) if opts.trust else None
        held = [Path(p).read_bytes() for p in opts.checkpoint]
        bundle_notes: list[bytes] = []
        if is_log:
            report = _verify_log(source, trusted, held, opts)
        else:
            report, bundle_notes = _verify_bundle(opts, trusted, held, private)
    except (SaihmError, OSError) as err:
        print(f"saihm verify: {_scrub(message(err), opts)}", file=sys.stderr)
        return 2
    if opts.witness:
        notes = held or (_log_notes(source) if is_log else bundle_notes)
        check_witnesses(report, notes, opts.witness, need, every=bool(held))
    if opts.json:
        print(json.dumps(report.to_json(), default=str))
    else:
        print(report.render())
    return 0 if report.ok else 1


PrivateCheck = Callable[
    [argparse.Namespace, Callable[[str, int], Callable[[int], None]]],
    tuple[dict[str, object], list[tuple[str, str, str, str]]],
]


def _run_private(
    private: PrivateCheck, opts: argparse.Namespace, bar: Progress, report: Report
) -> None:
    try:
        summary, findings = private(opts, bar.task)
    except NotFound as err:
        # What the private checks need is not here (a restored backup holds no KEKs): the public
        # checks stand on their own, and the verdict says the private state was not checked.
        report.private_unchecked = str(err)
        return
    except (SaihmError, OSError) as err:
        report.fail("private state", f"could not be checked: {err}")
        return
    report.private = summary
    for database, key, check, what in findings:
        report.fail(check, what, database=database, key=key)


def _verify_log(
    source: str, trusted: list[str] | None, held: list[bytes], opts: argparse.Namespace
) -> Report:
    """A live log or a tiled directory, streamed from leaf 0 through the mirror's checks."""
    from saihm.audit.mirror import verify_log
    from saihm.audit.progress import progress

    if opts.second_implementation:
        raise SaihmError("--second-implementation is available for bundles only")
    with progress(not opts.no_progress) as bar:
        outcome = verify_log(source, trust=trusted, held=held, workers=opts.workers, bar=bar)
    return outcome.report


def _verify_bundle(
    opts: argparse.Namespace,
    trusted: list[str] | None,
    held: list[bytes],
    private: PrivateCheck | None,
) -> tuple[Report, list[bytes]]:
    """An audit bundle, or a data directory read into one; the report and the bundle's
    checkpoint notes (what ``--witness`` checks when no ``--checkpoint`` is held)."""
    from saihm.audit.bundle import read_bundle
    from saihm.audit.datadir import read_data_dir
    from saihm.audit.progress import progress
    from saihm.audit.verifier import verify_bundle

    bundle = (
        read_bundle(opts.source)
        if opts.source
        else read_data_dir(opts.data, with_cells=True, store=opts.store)
    )
    with progress(not opts.no_progress) as bar:
        report = verify_bundle(
            bundle,
            trusted_keys=trusted,
            held=held,
            workers=opts.workers,
            progress=bar,
            second_implementation=opts.second_implementation,
            source=opts.source or _data_source(opts),
        )
        if opts.data is not None and private is not None:
            _run_private(private, opts, bar, report)
        elif opts.data is not None:
            report.notes.append("the operator's private state was not checked")
    return report, [note for _, note in bundle.checkpoints]


def _data_source(opts: argparse.Namespace) -> str:
    """How a report names a data directory (and its store, without a password)."""
    from saihm.storeurl import redact

    if opts.store is None:
        return f"--data {opts.data}"
    return f"--data {opts.data} --store {redact(opts.store)}"


def _log_notes(source: str) -> list[bytes]:
    """The checkpoint whose cosignatures ``--witness`` checks on a log when no
    ``--checkpoint`` is held: the log's latest (cosigned) checkpoint."""
    from saihm.audit.fetch import open_source

    log = open_source(source)
    # A live operator serves its newest cosigned checkpoint at ?witnessed=1 (a fresh one may
    # not be cosigned yet); a static server ignores the query and serves the file.
    witnessed = "checkpoint?witnessed=1" if source.startswith(("http://", "https://")) else None
    note = (log.get(witnessed) if witnessed else None) or log.get("checkpoint")
    return [] if note is None else [note]


def monitor(args: argparse.Namespace | list[str]) -> int:
    """``saihm monitor URL --state DIR [--trust FILE] [--interval S] [--once] ...``."""
    from saihm.audit.monitor import main

    return main(_rest(args))


def mirror(args: argparse.Namespace | list[str]) -> int:
    """``saihm mirror URL DIR [--trust FILE] ...``."""
    from saihm.audit.mirror import main

    return main(_rest(args))


def replay(args: argparse.Namespace | list[str]) -> int:
    """``saihm replay FILE --out DIR [--format lmdb|jsonl]``."""
    from saihm.audit.replay import main

    return main(_rest(args))
