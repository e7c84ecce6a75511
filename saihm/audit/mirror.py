"""``saihm mirror URL DIR`` and ``saihm verify DIR|URL``: a stranger's verified copy of a log.

``mirror`` runs the engine (``sync.py``: every receipt, tile and signed root verified; rollback
and fork are alarms) from a URL (a running operator or a tlog-tiles prefix) into DIR, which it
keeps in the tlog-tiles layout (``publish.TileDir``), so DIR is itself a servable log, with its
state in ``DIR/.saihm-mirror`` (``MirrorState``). Before each run it recomputes, from DIR's
tiles, the root of every checkpoint DIR holds. Exit status of ``main``: 0 when everything
verified, 1 on an alarm, 2 when the log cannot be read or the options are wrong.

``verify_log`` runs the same engine from leaf 0 over a URL or a directory (a mirror or a
publication) with its state in a temporary directory and writes nothing; where the log
publishes an erasure list (``v1/erasures``) it is checked against the FORGET receipts.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from saihm.audit.fetch import HttpSource, Source, open_source
from saihm.audit.leafcheck import short
from saihm.audit.mirrorstate import DIRNAME, MirrorState
from saihm.audit.progress import Progress, progress
from saihm.audit.publish import TileDir, checkpoint_of
from saihm.audit.report import Alarm, AlarmKind, Report
from saihm.audit.sync import Outcome, sync, tree_of
from saihm.audit.tiletree import root_from_tiles
from saihm.errors import MalformedInput
from saihm.translog.tiles import tile_path

__all__ = ["MirrorOptions", "Outcome", "held_notes", "mirror", "run", "verify_log"]


def mirror(
    url: str,
    directory: str | Path,
    *,
    trust: Sequence[str] | None = None,
    held: Sequence[bytes] = (),
    workers: int = 1,
    bar: Progress | None = None,
) -> Outcome:
    """One mirror run of ``url`` into ``directory`` (created if new)."""
    root = Path(directory)
    source = open_source(url)
    if isinstance(source, HttpSource):
        _ = source.prefix  # an unreachable log fails here, before DIR is created
    root.mkdir(parents=True, exist_ok=True)
    with MirrorState(root / DIRNAME) as state:
        alarms = _check_dir(root, state)
        if alarms:
            return Outcome(Report(source=url), alarms=alarms)
        outcome = sync(
            source,
            state,
            sink=TileDir(root),
            trust=trust,
            held=held,
            workers=workers,
            bar=bar,
        )
    outcome.report.source = url
    return outcome


def _check_dir(root: Path, state: MirrorState) -> list[Alarm]:
    """Every checkpoint held in DIR against the tree verified in DIR, before anything is fetched.

    Each note in ``checkpoints/`` was verified when adopted; here its root must still equal the
    root recomputed from DIR's tiles at its size (``root_from_tiles``), so a held checkpoint is
    consistent with the tree the next run extends, even after the directory was edited.
    """
    with state.begin() as txn:
        tree = tree_of(state, txn)
    partial = {(level, index): width for level, index, width, _ in tree.partial_tiles()}
    cache: dict[tuple[int, int], bytes | None] = {}

    def read(level: int, index: int) -> bytes | None:
        if (level, index) not in cache:
            path = root / tile_path(level, index)
            if not path.exists() and (level, index) in partial:
                path = root / tile_path(level, index, partial[level, index])
            cache[level, index] = path.read_bytes() if path.exists() else None
        return cache[level, index]

    alarms: list[Alarm] = []
    for note in held_notes(root):
        try:
            held = checkpoint_of(note)
        except MalformedInput as err:
            what = f"a note in {root}/checkpoints is unreadable: {err}"
            alarms.append(Alarm(AlarmKind.INCONSISTENT, what))
            continue
        if held.size > tree.size or root_from_tiles(held.size, read) != held.root_hash:
            what = (
                f"{root}/checkpoints/{held.size}.note does not match the tree "
                f"verified in {root} (edited?)"
            )
            alarms.append(Alarm(AlarmKind.INCONSISTENT, what))
    return alarms


def held_notes(directory: str | Path) -> list[bytes]:
    """Every ``checkpoints/<size>.note`` a mirror directory holds, by size."""
    found = []
    for path in Path(directory, "checkpoints").glob("*.note"):
        stem = path.stem
        if stem.isdigit():
            found.append((int(stem), path.read_bytes()))
    return [note for _, note in sorted(found)]


def verify_log(
    where: str,
    *,
    trust: Sequence[str] | None = None,
    held: Sequence[bytes] = (),
    workers: int = 1,
    bar: Progress | None = None,
) -> Outcome:
    """Verify a live log (URL) or a mirror / publication (DIR) from leaf 0, writing nothing.

    A directory's own ``checkpoints/`` notes are checked too, and its pinned keys used unless
    ``trust`` is given.
    """
    source = open_source(where)
    notes = list(held)
    keys = trust
    mirrored = Path(where, DIRNAME, "keys.txt")
    if not where.startswith(("http://", "https://")):
        notes += held_notes(where)
        if keys is None and mirrored.exists():
            keys = [k.strip() for k in mirrored.read_text().splitlines() if k.strip()]
    with tempfile.TemporaryDirectory(prefix="saihm-verify-") as tmp, MirrorState(tmp) as state:
        outcome = sync(
            source,
            state,
            sink=None,
            trust=keys,
            held=notes,
            workers=workers,
            bar=bar,
            stop_on_failure=False,
        )
        if outcome.adopted:
            with state.begin() as txn:
                _check_erasures(source, dict(state.erasures(txn)), outcome)
    if trust is None and keys is not None:
        outcome.report.keys_pinned = False
        outcome.report.notes.append(
            f"checkpoint keys from the mirror's {mirrored}, not pinned by this command (--trust)"
        )
    for alarm in outcome.alarms:
        outcome.report.fail(alarm.kind, alarm.detail.strip())
    return outcome


def _check_erasures(source: Source, rebuilt: dict[bytes, int], outcome: Outcome) -> None:
    """Check 5 where the log publishes one: ``v1/erasures`` against the FORGET receipts.

    saihm-protocol "Erasure": every cell a FORGET receipt below the checkpoint names must be
    listed; a listed cell no receipt names is a failure when the list reflects exactly the
    verified size (a live list may already include erasures beyond the checkpoint).
    """
    raw = source.get("v1/erasures")
    report = outcome.report
    if raw is None:
        report.notes.append("the log publishes no erasure list (v1/erasures): not compared")
        return
    try:
        body = json.loads(raw)
        listed = {bytes.fromhex(c) for c in body["cellIds"]}
        tree_size = int(body["treeSize"])
    except (ValueError, KeyError, TypeError) as err:
        report.fail("erasures", f"v1/erasures is not the erasure list: {short(err)}")
        return
    for cell_id, index in sorted(rebuilt.items(), key=lambda kv: kv[1]):
        if cell_id not in listed:
            report.fail(
                "erasures",
                f"FORGET receipt for cell {cell_id.hex()} is missing from "
                "the published erasure list",
                index,
            )
    if tree_size == outcome.size:
        for cell_id in sorted(listed - set(rebuilt)):
            report.fail(
                "erasures",
                f"the published erasure list names cell {cell_id.hex()} "
                "but no FORGET receipt in the log erases it",
            )
    elif listed - set(rebuilt):
        report.notes.append(
            f"{len(listed - set(rebuilt))} published erasures lie beyond the "
            "verified checkpoint: not yet checkable"
        )


@contextmanager
def _bar(enabled: bool) -> Iterator[Progress]:
    with progress(enabled) as bar:
        yield bar


def _trust(path: str | None) -> list[str] | None:
    if path is None:
        return None
    lines = Path(path).read_text().splitlines()
    return [k.strip() for k in lines if k.strip() and not k.startswith("#")]


@dataclass(frozen=True)
class MirrorOptions:
    """``saihm mirror URL DIR ...`` (parsed in saihm.commands.audit)."""

    url: str
    dir: str
    trust: str | None = None
    checkpoint: tuple[str, ...] = ()
    workers: int = 1
    json: bool = False
    no_progress: bool = False


def run(opts: MirrorOptions) -> int:
    """Bring the mirror ``opts.dir`` of ``opts.url`` up to date; print the outcome."""
    # Unreadable input raises (SaihmError, OSError): the command line prints it, exit 2.
    trust = _trust(opts.trust)
    held = [Path(p).read_bytes() for p in opts.checkpoint]
    with _bar(not opts.no_progress) as bar:
        outcome = mirror(opts.url, opts.dir, trust=trust, held=held, workers=opts.workers, bar=bar)
    report = outcome.report
    summary = {
        "url": opts.url,
        "dir": opts.dir,
        "size": outcome.size,
        "root": outcome.root,
        "newEntries": outcome.new_entries,
        "signatures": report.signatures,
        "keysPinned": report.keys_pinned,
        "alarms": [str(a) for a in outcome.alarms],
        "failures": [str(f) for f in report.failures],
        "notes": report.notes,
    }
    print(json.dumps(summary) if opts.json else _render(summary))
    for alarm in outcome.alarms:
        print(f"saihm mirror: ALARM: {alarm}", file=sys.stderr)
    for failure in report.failures[:20]:
        print(f"saihm mirror: ALARM: {failure}", file=sys.stderr)
    return 0 if outcome.ok else 1


def _render(summary: dict) -> str:
    pinned = "pinned" if summary["keysPinned"] else "NOT pinned (fetched from the log)"
    verdict = "OK" if not summary["alarms"] and not summary["failures"] else "ALARM"
    return (
        f"saihm mirror {summary['url']} -> {summary['dir']}: size {summary['size']}, "
        f"{summary['newEntries']} new entries, {summary['signatures']} signatures checked, "
        f"keys {pinned}: {verdict}"
    )
