"""The mirror's engine: bring a mirror state (and a tile directory) up to a log's checkpoint.

``sync`` reads a log through a ``Source`` and, for every entry bundle from where it stopped last
time to the size of the log's current checkpoint:

1. applies the verifier's check 1 to every leaf (``LeafChecker``: strict receipt encoding,
   receiptId, no repeat, the holder's KEY receipt) and its check 2 (the ML-DSA-65 signature);
2. rebuilds the tree tile by tile from the entries (``TileTree``) and requires every hash tile
   the log serves, full and partial, to equal the rebuilt one (c2sp.org/tlog-tiles);
3. requires the rebuilt root to equal the signed root of every checkpoint it knows whose size it
   passes: the one being mirrored, the ones held and any given with ``--checkpoint``; so each
   held checkpoint is consistent with the new one by recomputation (RFC 9162 §2.1.4);
4. verifies the checkpoint's signatures with the pinned keys (``--trust FILE`` at first
   contact) or, unpinned, with ``v1/keys`` from the log (and says so).

A checkpoint smaller than one the log signed before is a **rollback**; another root for a size
held, or new entries that do not extend the held tree, a **fork**. Either is an alarm and
nothing is adopted. State and tiles are committed per batch of bundles (tiles first), the
checkpoint last, so a run killed at any point resumes where the last batch ended.
"""

from __future__ import annotations

import json
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from saihm.audit.fetch import FetchError, Prefetch, Source
from saihm.audit.leafcheck import LeafChecker, short
from saihm.audit.mirrorstate import MirrorState
from saihm.audit.progress import Progress
from saihm.audit.publish import TileDir, checkpoint_of
from saihm.audit.report import Alarm, AlarmKind, Report
from saihm.audit.sigcheck import Job, SignaturePool
from saihm.audit.tiletree import TileTree
from saihm.errors import Conflict, MalformedInput, SaihmError
from saihm.events import Operation
from saihm.translog import Checkpoint, leaf_hash, verify_checkpoint
from saihm.translog.tiles import (
    HASHES_PER_TILE,
    bundle_of,
    bundle_range,
    bundle_width,
    decode_entry_bundle,
    first_leaf,
    tile_path,
)

__all__ = ["BATCH_BUNDLES", "Outcome", "sync"]

#: Entry bundles verified and committed together (4,096 leaves, a few MB in memory).
BATCH_BUNDLES = 16


@dataclass
class Outcome:
    """What one run found: the verification report, alarms, and the checkpoint it reached."""

    report: Report
    alarms: list[Alarm] = field(default_factory=list)
    size: int | None = None
    root: str | None = None
    new_entries: int = 0
    adopted: bool = False

    @property
    def ok(self) -> bool:
        return not self.alarms and self.report.ok


class _Stop(Exception):
    """Raised inside a batch to abandon it (nothing of the batch is committed)."""


@dataclass
class _Known:
    """A signed checkpoint the run must stay consistent with (``held``: not the new one)."""

    size: int
    root: bytes
    what: str
    held: bool = True
    extends: str = ""


@dataclass(frozen=True)
class _Run:
    """What every step of one run shares: where it reads and writes, the checkpoint it mirrors
    up to (and its note), how it checks, and the outcome it fills in."""

    source: Source
    state: MirrorState
    sink: TileDir | None
    cp: Checkpoint
    note: bytes
    workers: int
    stop_on_failure: bool
    out: Outcome
    signatures: SignaturePool | None = None


@dataclass(frozen=True)
class _Batch:
    """What the bundles of one batch collect before it is committed: the leaf checks, the
    erasures seen, the signature jobs and the tiles to write (path, bytes, immutable)."""

    checker: LeafChecker
    erasures: MutableMapping[bytes, int]
    jobs: list[Job] = field(default_factory=list)
    writes: list[tuple[str, bytes, bool]] = field(default_factory=list)


def sync(
    source: Source,
    state: MirrorState,
    *,
    sink: TileDir | None,
    trust: Sequence[str] | None = None,
    held: Sequence[bytes] = (),
    workers: int = 1,
    bar: Progress | None = None,
    stop_on_failure: bool = True,
) -> Outcome:
    """Bring ``state`` (and ``sink``) up to the checkpoint ``source`` serves now; see the module.

    ``held`` are signed notes from elsewhere (``--checkpoint``, a mirror's ``checkpoints/``).
    Never raises for what the log serves: every problem is an alarm or a report failure.
    Raises ``FetchError`` if the log cannot be read and ``MalformedInput`` for a bad ``trust``.
    """
    bar = bar or Progress()
    report = Report(source=source.name)
    out = Outcome(report)
    keys = _keys(source, state, trust, report)
    note = source.require("checkpoint")
    try:
        cp = verify_checkpoint(note, keys)
    except SaihmError as err:
        out.alarms.append(
            Alarm(AlarmKind.BAD_SIGNATURE, f"the checkpoint does not verify: {short(err)}")
        )
        return out
    report.origin, report.checkpoints = cp.origin, 1
    out.size, out.root = cp.size, cp.root_hash.hex()
    known = _known(state, keys, held, cp, report, out)
    if out.alarms:
        return out
    with state.begin() as txn:
        tree = tree_of(state, txn)
    report.leaves = cp.size
    if tree.size < cp.size:
        run = _Run(source, state, sink, cp, note, workers, stop_on_failure, out)
        _stream(run, tree, known, bar)
    elif tree.root() != cp.root_hash:
        out.alarms.append(Alarm(AlarmKind.FORK, f"the log signed another root for size {cp.size}"))
    if out.ok:
        _adopt(state, sink, note, cp, out)
        report.latest_size = cp.size
    with state.begin() as txn:
        report.erasures = len(state.erasures(txn))
    report.notes.append("governance tallies are not published in a tiled log: not compared")
    return out


def _keys(
    source: Source, state: MirrorState, trust: Sequence[str] | None, report: Report
) -> list[str]:
    """The verifier keys: pinned in the state, else ``trust``, else the log's own v1/keys."""
    held = state.keys()
    with state.begin() as txn:
        pinned = state.meta(txn, b"pinned") == b"1"
    if held is not None and trust and sorted(held) != sorted(trust):
        raise MalformedInput(f"--trust names other keys than those pinned in {state.dir}")
    if held is None:
        if trust:
            held, pinned = list(trust), True
        else:
            raw = source.require("v1/keys")
            try:
                held = [str(k["vkey"]) for k in json.loads(raw)["checkpointKeys"]]
            except (ValueError, KeyError, TypeError) as err:
                raise FetchError(f"{source.name}: v1/keys is not the keys document") from err
        # The flag first: keys.txt is what marks the keys as chosen (a rerun after a kill
        # between the two writes chooses again).
        with state.begin() as txn:
            state.set_meta(txn, b"pinned", b"1" if pinned else b"0")
        state.save_keys(held)
    report.keys_pinned = pinned
    if not pinned:
        report.notes.append("checkpoint keys were fetched from the log (v1/keys), not pinned")
    return held


def tree_of(state: MirrorState, txn: Any) -> TileTree:
    """The mirror's right edge as of ``txn`` (a transaction of ``state``; its type is the
    mirror state's storage's)."""
    raw = state.meta(txn, b"tree")
    return TileTree() if raw is None else TileTree.from_bytes(raw)


def _known(
    state: MirrorState,
    keys: list[str],
    held: Sequence[bytes],
    cp: Checkpoint,
    report: Report,
    out: Outcome,
) -> list[_Known]:
    """Checkpoints the new one must be consistent with; alarms for rollback and same-size fork."""
    known: list[_Known] = []
    with state.begin() as txn:
        for key, what in ((b"held", "held checkpoint"), (b"target", "checkpoint signed before")):
            raw = state.meta(txn, key)
            if raw is not None:
                c = checkpoint_of(raw)
                known.append(_Known(c.size, c.root_hash, what))
    for raw in held:
        try:
            c = verify_checkpoint(raw, keys)
        except SaihmError as err:
            report.fail("held checkpoint", f"does not verify: {short(err)}")
            continue
        if c.origin != cp.origin:
            report.fail("held checkpoint", f"is for another log ({c.origin})")
            continue
        report.held_checkpoints += 1
        known.append(_Known(c.size, c.root_hash, "held checkpoint"))
    for k in known:
        if k.size > cp.size:
            out.alarms.append(
                Alarm(AlarmKind.ROLLBACK, f"checkpoint size {cp.size} < {k.what} size {k.size}")
            )
        elif k.size == cp.size and k.root != cp.root_hash:
            out.alarms.append(
                Alarm(AlarmKind.FORK, f"two different roots signed for size {cp.size}")
            )
    return known


def _stream(run: _Run, tree: TileTree, known: list[_Known], bar: Progress) -> None:
    """Fetch, verify and commit bundles from ``tree.size`` to ``cp.size`` (steps 1-3)."""
    cp = run.cp
    bundles = bundle_range(tree.size, cp.size)
    advance = bar.task("mirroring entries", cp.size - tree.size)
    ahead = {k.size: k for k in known if tree.size < k.size < cp.size}
    checks = [ahead[size] for size in sorted(ahead)]
    below = [k for k in known if k.size < cp.size]
    base = max(below, key=lambda k: k.size) if below else None
    extends = f"{base.what} of size {base.size}" if base else ""
    checks.append(_Known(cp.size, cp.root_hash, "checkpoint", held=False, extends=extends))
    with run.state.begin() as txn:
        run.state.set_meta(txn, b"target", run.note)
    with Prefetch(run.source) as source, SignaturePool(run.workers) as signatures:
        run = replace(run, source=source, signatures=signatures)
        batches = [bundles[i : i + BATCH_BUNDLES] for i in range(0, len(bundles), BATCH_BUNDLES)]
        for i, batch in enumerate(batches):
            # While this batch is verified, the next one is fetched (network I/O releases the
            # GIL); at most two batches are in memory.
            source.warm(_paths(cp, batches[i + 1] if i + 1 < len(batches) else range(0)))
            if i == 0:
                source.warm(_paths(cp, batch))
            if not _batch(run, tree, batch, checks, advance):
                return


def _paths(cp: Checkpoint, batch: range) -> list[str]:
    """The entry bundles and level-0 tiles of the bundles of ``batch``."""
    out = []
    for n in batch:
        width = bundle_width(cp.size, n)
        partial = None if width == HASHES_PER_TILE else width
        out += [tile_path(None, n, partial), tile_path(0, n, partial)]
    return out


def _batch(
    run: _Run,
    tree: TileTree,
    bundles: range,
    checks: list[_Known],
    advance: Callable[[int], None],
) -> bool:
    """Verify and commit one batch of bundles; False when the run must stop."""
    out, state = run.out, run.state
    report = out.report
    failures = len(report.failures)
    try:
        with state.begin() as txn:
            batch = _Batch(
                LeafChecker(report, state.holders(txn), state.receipts(txn)),
                state.erasures(txn),
            )
            signatures = run.signatures
            assert signatures is not None
            for n in bundles:
                submitted = len(batch.jobs)
                added = _bundle(run, tree, n, batch, checks)
                # Checked by the workers while the next bundle is decoded.
                signatures.submit(batch.jobs[submitted:])
                out.new_entries += added
                advance(added)
            if bundles[-1] == bundle_of(run.cp.size - 1):
                _partials(run, tree, batch.writes)
            bad = signatures.results()
            for index, reason in bad:
                report.fail("signature", f"receipt {reason}", index)
            report.signatures += len(batch.jobs)
            if out.alarms or (run.stop_on_failure and len(report.failures) > failures):
                raise _Stop
            # The tiles first, then the state that accounts for them (module docstring).
            if run.sink is not None:
                for path, data, immutable in batch.writes:
                    run.sink.write(path, data, immutable=immutable)
            state.set_meta(txn, b"tree", tree.to_bytes())
    except _Stop:
        return False
    except Conflict as err:
        out.alarms.append(Alarm(AlarmKind.FORK, str(err)))
        return False
    return True


def _bundle(run: _Run, tree: TileTree, n: int, batch: _Batch, checks: list[_Known]) -> int:
    """Verify entry bundle ``n`` (at its width for ``cp``); return how many leaves were new."""
    out = run.out
    report = out.report
    width = bundle_width(run.cp.size, n)
    partial = None if width == HASHES_PER_TILE else width
    path = tile_path(None, n, partial)
    first = first_leaf(0, n)
    try:
        leaves = decode_entry_bundle(run.source.require(path))
    except MalformedInput as err:
        report.fail("entries", f"{path}: {err}", first)
        raise _Stop from err
    if len(leaves) != width:
        report.fail("entries", f"{path} holds {len(leaves)} entries, want {width}", first)
        raise _Stop
    skip = tree.size - first
    mirrored = bytes(tree.partials[0]) if tree.partials else b""
    if skip and b"".join(leaf_hash(x) for x in leaves[:skip]) != mirrored:
        what = f"{path} changes entries below size {tree.size}, mirrored before"
        out.alarms.append(Alarm(AlarmKind.FORK, what))
        raise _Stop
    done: list[tuple[int, int, bytes]] = []
    for i in range(skip, width):
        index = first + i
        checked = batch.checker.check(index, leaves[i])
        if checked is not None:
            receipt, job = checked
            batch.jobs.append(job)
            erasures = batch.erasures
            if receipt.operation == Operation.FORGET and receipt.subject_id not in erasures:
                erasures[receipt.subject_id] = index
        done += tree.append([leaf_hash(leaves[i])])
        while checks and checks[0].size == tree.size:
            _check_root(tree, checks.pop(0), out)
    writes = batch.writes
    for level, index, data in done:
        _tile(run, level, index, None, data, writes)
        if level == 0:
            writes.append((tile_path(None, index), _join(leaves), True))
    if partial is not None:
        _tile(run, 0, n, partial, bytes(tree.partials[0]), writes)
        writes.append((path, _join(leaves), False))
    return width - skip


def _check_root(tree: TileTree, k: _Known, out: Outcome) -> None:
    """Step 3 at one size: the rebuilt root must be the signed one."""
    if tree.root() == k.root:
        if k.held:
            out.report.consistency_proofs += 1
        return
    if k.held:
        out.alarms.append(
            Alarm(
                AlarmKind.FORK,
                f"the log's first {k.size} entries do not hash to the root of the {k.what}"
                f" of size {k.size}",
            )
        )
    elif k.extends:
        out.alarms.append(
            Alarm(
                AlarmKind.FORK,
                f"checkpoint {k.size} does not extend the {k.extends}: the "
                "entries after it do not hash to the signed root",
            )
        )
    else:
        out.alarms.append(
            Alarm(
                AlarmKind.ROOT, f"the entries do not hash to the signed root of checkpoint {k.size}"
            )
        )
    raise _Stop


def _partials(run: _Run, tree: TileTree, writes: list[tuple[str, bytes, bool]]) -> None:
    """The partial hash tiles above level 0 of the mirrored size."""
    for level, index, width, data in tree.partial_tiles():
        if level > 0:
            _tile(run, level, index, width, data, writes)


def _tile(
    run: _Run,
    level: int,
    index: int,
    width: int | None,
    rebuilt: bytes,
    writes: list[tuple[str, bytes, bool]],
) -> None:
    """Step 2 for one tile: the served tile must equal the rebuilt one."""
    path = tile_path(level, index, width)
    served = run.source.get(path)
    if served != rebuilt:
        what = "is missing" if served is None else "differs from the tree rebuilt from the entries"
        run.out.report.fail("tiles", f"{path} {what}", first_leaf(level, index))
        raise _Stop
    writes.append((path, rebuilt, width is None))


def _join(leaves: Sequence[bytes]) -> bytes:
    return b"".join(len(x).to_bytes(2, "big") + x for x in leaves)


def _adopt(
    state: MirrorState, sink: TileDir | None, note: bytes, cp: Checkpoint, out: Outcome
) -> None:
    """Make ``cp`` the held checkpoint: the note in DIR/checkpoints, then DIR/checkpoint."""
    with state.begin() as txn:
        previous = state.meta(txn, b"held")
    if sink is not None:
        sink.write(f"checkpoints/{cp.size}.note", note, immutable=False)
        keys = state.keys() or []
        sink.write_keys(cp.origin, keys)
        sink.write_checkpoint(note)
    with state.begin() as txn:
        if previous is None or checkpoint_of(previous).size < cp.size:
            state.set_meta(txn, b"held", note)
        state.set_meta(txn, b"target", None)
    if sink is not None:
        sizes = {cp.size} | ({checkpoint_of(previous).size} if previous else set())
        sink.prune_partials(sizes)
    out.adopted = True
