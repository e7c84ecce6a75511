"""``saihm export`` and ``saihm verify``: what they do and print, given typed options
(saihm.commands.audit parses them). Each returns the exit code: 0 only on success, 1 when a
check failed; unreadable input raises ``SaihmError`` (one line and exit 2 from the command
line's one printer, saihm/commands/main.py).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from saihm.audit.witnessopts import check_witnesses
from saihm.config import Config
from saihm.errors import NotFound, SaihmError, message

if TYPE_CHECKING:
    from saihm.audit.progress import Progress
    from saihm.audit.report import Report

__all__ = ["ExportOptions", "PrivateCheck", "VerifyOptions", "export", "verify"]


def _keys_file(path: str) -> list[str]:
    """Verifier keys ``<name>+<hash>+<base64>``, one per line (blank lines and # ignored)."""
    lines = Path(path).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _store(data: str | None, store: str | None) -> str | None:
    """``--store``, else ``$SAIHM_STORE`` (with ``--data`` only), checked; None for LMDB."""
    import os

    from saihm.storage.url import ENV, check_store_url

    if data is None:
        if store is not None:
            raise SaihmError("--store goes with --data DIR")
        return None
    store = store or os.environ.get(ENV) or None
    if store is None:
        from saihm.storage.url import refuse_migrated

        refuse_migrated(Path(data))
        return None
    return check_store_url(store)


def _scrub(text: str, store: str | None) -> str:
    from saihm.storage.hint import with_store
    from saihm.storage.url import scrub

    return with_store(scrub(text, store), store)


@dataclass(frozen=True)
class ExportOptions:
    """``saihm export --data DIR --out FILE [--with-cells] [--store URL]``."""

    data: str
    out: str
    with_cells: bool = False
    store: str | None = None


def export(opts: ExportOptions) -> int:
    """Write the audit bundle of ``opts.data`` to ``opts.out``; print its summary."""
    from saihm.audit.export import stream_bundle

    store = opts.store
    try:
        store = _store(opts.data, opts.store)
        written = stream_bundle(opts.data, opts.out, with_cells=opts.with_cells, store=store)
    except (SaihmError, OSError) as err:
        raise SaihmError(_scrub(message(err), store)) from err
    for index, what in written.pop("problems"):
        print(f"saihm export: warning: leaf {index}: {what}", file=sys.stderr)
    print(json.dumps({"out": opts.out, **written}))
    return 0


@dataclass(frozen=True)
class VerifyOptions:
    """``saihm verify``: exactly one of ``source`` (a bundle, a mirror directory or a log
    URL) and ``data`` (a data directory); ``witness`` keys and the ``min_witnesses`` needed
    (already checked against each other); the rest as the options say."""

    source: str | None = None
    data: str | None = None
    trust: str | None = None
    checkpoint: tuple[str, ...] = ()
    second_implementation: bool = False
    workers: int = 1
    json: bool = False
    kek_dir: str | None = None
    log_keys_dir: str | None = None
    no_progress: bool = False
    store: str | None = None
    witness: tuple[str, ...] = field(default=())
    min_witnesses: int = 1


def verify(opts: VerifyOptions, private: PrivateCheck | None = None) -> int:
    """``saihm verify FILE|DIR|URL | --data DIR [--trust KEYFILE] [--checkpoint NOTE]... ...``.

    ``private`` is the operator's private-state check (saihm/offline/fsck.py, injected by
    saihm/commands/audit.py so this layer imports nothing of the store): with ``--data`` it is
    called with the data directory's Config and a progress-task factory and returns a summary
    and its findings ``(database, key, check, what)``, each recorded as a failure.
    """
    if opts.second_implementation and importlib.util.find_spec("pqcrypto") is None:
        hint = "--second-implementation needs the optional pqcrypto package"
        raise SaihmError(f"{hint}: pip install 'saihm[audit]'")

    source = opts.source
    is_log = source is not None and (
        source.startswith(("http://", "https://")) or Path(source, "checkpoint").is_file()
    )
    if source is not None and not is_log and Path(source, "lmdb").is_dir():
        raise SaihmError(f"{source} is a data directory: use --data {source}")
    try:
        opts = replace(opts, store=_store(opts.data, opts.store))
        trusted = _keys_file(opts.trust) if opts.trust else None
        held = [Path(p).read_bytes() for p in opts.checkpoint]
        bundle_notes: list[bytes] = []
        if is_log and source is not None:
            report = _verify_log(source, trusted, held, opts)
        else:
            report, bundle_notes = _verify_bundle(opts, trusted, held, private)
    except (SaihmError, OSError) as err:
        raise SaihmError(_scrub(message(err), opts.store)) from err
    if opts.witness:
        notes = held or (_log_notes(source) if is_log and source else bundle_notes)
        check_witnesses(report, notes, list(opts.witness), opts.min_witnesses, every=bool(held))
    if opts.json:
        print(json.dumps(report.to_json(), default=str))
    else:
        print(report.render())
    return 0 if report.ok else 1


PrivateCheck = Callable[
    [Config, Callable[[str, int], Callable[[int], None]]],
    tuple[dict[str, object], list[tuple[str, str, str, str]]],
]


def _run_private(private: PrivateCheck, opts: VerifyOptions, bar: Progress, report: Report) -> None:
    assert opts.data is not None
    config = Config.for_data(opts.data, opts.kek_dir, None, opts.log_keys_dir, store=opts.store)
    try:
        summary, findings = private(config, bar.task)
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
    source: str, trusted: list[str] | None, held: list[bytes], opts: VerifyOptions
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
    opts: VerifyOptions,
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

    if opts.source:
        bundle = read_bundle(opts.source)
    else:
        assert opts.data is not None  # exactly one of the two (saihm.commands.audit)
        bundle = read_data_dir(opts.data, with_cells=True, store=opts.store)
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


def _data_source(opts: VerifyOptions) -> str:
    """How a report names a data directory (and its store, without a password)."""
    from saihm.storage.url import redact

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
