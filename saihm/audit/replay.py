"""``saihm replay SOURCE --out DIR``: a log, as a stranger has it, turned into data to study.

SOURCE is an audit bundle (``saihm export``), a mirror or publication directory (``saihm
mirror``, ``saihm publish``) or a log URL (an operator's base URL or a tlog-tiles prefix).
Replay verifies before it writes, with the code ``saihm verify`` runs: a bundle through
``verify_bundle``; a URL by mirroring it into ``DIR/.saihm-replay/log`` (``saihm mirror``'s
engine: every receipt, signature, tile and checkpoint; that directory is a verified mirror, kept
so the next run fetches only what the log added); a directory through the same engine with its
state in ``DIR/.saihm-replay/state``. Only the verified prefix (the size of the newest signed
checkpoint) is replayed. The checkpoint a run reached is kept and checked by the next run (a log
that rewrote or dropped what was replayed fails it). The replay pass reads the leaves again, so
it hashes each and requires the tree of the events (held and new) to hash to the verified root
for the verified size, or writes nothing (``_bound``). ``--no-verify`` skips all of this, and
the summary says ``"verified": false``.

Formats: ``parquet``, ``csv``, ``jsonl``: the research dataset (saihm.audit.dataset; docs/formats.md
§8), appended to on each run; ``lmdb`` (the default): the public projections, written once into a
new directory. LMDB layout (named databases; u64 = 8-byte big-endian leaf index; values are JSON
text): ``receipts`` u64 -> receipt; ``by_subject`` subjectId||u64; ``by_holder`` holderId||u64;
``by_operation`` operation||0x00||u64 (index keys have empty values); ``holders`` holderId ->
{"index", "publicKey"}; ``erasures`` cellId -> u64; ``tallies`` proposalId -> {"for",
"against", "abstain"}; ``events`` subjectId||u64 -> receipt.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from saihm.audit.bundle import Bundle, read_bundle
from saihm.audit.dataset import (
    FORMATS,
    STATE_DIR,
    Dataset,
    check_out,
    need_pyarrow,
    read_leaf,
)
from saihm.audit.derive import Derived
from saihm.audit.fetch import DirSource, FetchError, HttpSource, Source
from saihm.audit.progress import Progress, progress
from saihm.audit.publish import checkpoint_of
from saihm.audit.tiletree import TileTree
from saihm.errors import MalformedInput, SaihmError, message
from saihm.events import Operation, Receipt
from saihm.events.operations import replay_events
from saihm.storage.lmdb import LmdbStorage
from saihm.translog import leaf_hash
from saihm.translog.tiles import (
    HASHES_PER_TILE,
    bundle_range,
    bundle_width,
    decode_entry_bundle,
    first_leaf,
    tile_path,
)

__all__ = ["ReplayOptions", "receipt_json", "run"]

_U64 = struct.Struct(">Q")
#: The operations also written to the LMDB ``events`` database (the operation registry).
_EVENTS = replay_events()
#: Leaves per events flush (one Parquet part file, one fsync of a text file); the state is
#: committed once, at the end of a run.
COMMIT_EVERY = 262_144
_CPU_AT_START = [0.0]
_NO_VERIFY = "--no-verify: no signature, tile or checkpoint was checked"


def receipt_json(index: int, receipt: Receipt) -> dict:
    """The LMDB form of a receipt: ids hex, the KEY detail base64, other details as maps."""
    detail: object = receipt.detail
    if isinstance(detail, bytes):
        detail = base64.b64encode(detail).decode()
    elif detail is not None:
        detail = receipt.detail_map()
    return {
        "index": index,
        "receiptId": receipt.receipt_id.hex(),
        "subjectId": receipt.subject_id.hex(),
        "operation": str(receipt.operation),
        "holderId": receipt.holder_id.hex(),
        "timestamp": receipt.timestamp,
        "detail": detail,
    }


@dataclass(frozen=True)
class ReplayOptions:
    """``saihm replay SOURCE --out DIR [--format F] [--no-verify] [--trust FILE] ...``
    (parsed in saihm.commands.audit)."""

    source: str
    out: str
    format: str = "lmdb"
    no_progress: bool = False
    verify: bool = True
    trust: str | None = None
    workers: int = 1


# -- what SOURCE is -----------------------------------------------------------------------------


def classify(where: str) -> str:
    """``url``, ``tiles`` or ``bundle``; raise one line naming what to do for anything else."""
    if where.startswith(("http://", "https://")):
        return "url"
    path = Path(where)
    if not path.exists():
        raise SaihmError(
            f"{where}: no such file or directory (give an audit bundle, a mirror directory "
            "or a log URL)"
        )
    if path.is_dir():
        if (path / "checkpoint").is_file():
            return "tiles"
        if (path / "lmdb").is_dir() or (path / "log-keys").is_dir():
            raise SaihmError(
                f"{where} is an operator's data directory: run saihm export --data {where} "
                "--out BUNDLE first and replay BUNDLE (or replay the operator's URL)"
            )
        raise SaihmError(
            f"{where} holds no tiled log (no checkpoint file): give an audit bundle, a "
            "directory made by saihm mirror URL DIR, or a log URL"
        )
    return "bundle"


def _bundle(where: str) -> Bundle:
    try:
        return read_bundle(where)
    except MalformedInput as err:
        raise SaihmError(
            f"{where} is not an audit bundle ({message(err)}): make one with saihm export, "
            "or give a mirror directory or a log URL"
        ) from err


def _http(where: str) -> HttpSource:
    source = HttpSource(where)
    try:
        _ = source.prefix
    except FetchError as err:
        if "no checkpoint at" in str(err):
            raise SaihmError(
                f"{where} is not a saihm log (no checkpoint at /checkpoint or /log/checkpoint): "
                "give an operator's base URL or a tlog-tiles prefix"
            ) from err
        raise
    return source


def _note_origin(source: Source) -> tuple[bytes, str, int]:
    """The source's checkpoint note (signatures not checked here), its origin and size."""
    note = source.require("checkpoint")
    try:
        cp = checkpoint_of(note)
    except MalformedInput as err:
        raise SaihmError(f"{source.name}/checkpoint is not a checkpoint: {message(err)}") from err
    return note, cp.origin, cp.size


def recorded(out: Path) -> dict[str, str]:
    """What a previous run recorded in ``out`` (empty when none): format, origin, checkpoint."""
    path = out / STATE_DIR / "state.sqlite"
    if not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {str(k): str(v) for k, v in db.execute("SELECT key, value FROM meta")}
    except sqlite3.Error:
        return {}
    finally:
        db.close()


# -- verification -------------------------------------------------------------------------------


#: ``read(start)``: ``(index, leaf)`` from leaf ``start`` to the verified size, in order.
Reader = Callable[[int], Iterator[tuple[int, bytes]]]


@dataclass
class _Verified:
    """What phase one hands on: where the leaves are, how many, the root verified for that size
    (None with ``--no-verify``), the note reached, failures.

    The replay pass reads the leaves again (a directory can change after it was verified): it
    hashes every leaf it reads and requires the tree of those leaves to have ``root`` (see
    ``_bound``), so what is written is what was verified."""

    read: Reader | None
    size: int
    note: bytes | None
    problems: list[str]
    pinned: bool = False
    origin: str = ""
    root: bytes | None = None


def _trust(path: str | None) -> list[str] | None:
    if path is None:
        return None
    lines = Path(path).read_text().splitlines()
    return [k.strip() for k in lines if k.strip() and not k.startswith("#")]


def _verify_bundle(
    bundle: Bundle, opts: ReplayOptions, held: list[bytes], bar: Progress
) -> list[str]:
    from saihm.audit.verifier import verify_bundle

    report = verify_bundle(
        bundle,
        trusted_keys=_trust(opts.trust),
        held=held,
        workers=opts.workers,
        progress=bar,
        source=opts.source,
    )
    return [str(f) for f in report.failures]


def _verify_url(opts: ReplayOptions, held: list[bytes], bar: Progress) -> _Verified:
    from saihm.audit.mirror import mirror

    target = Path(opts.out) / STATE_DIR / "log"
    outcome = mirror(
        opts.source, target, trust=_trust(opts.trust), held=held, workers=opts.workers, bar=bar
    )
    problems = [str(a) for a in outcome.alarms] + [str(f) for f in outcome.report.failures]
    local = DirSource(target) if (target / "checkpoint").is_file() else None
    note = local.require("checkpoint") if local else None
    # The size and root verified are the outcome's (in memory), not the mirror's files.
    size = outcome.size or 0
    root = bytes.fromhex(outcome.root) if outcome.root is not None else None
    if note is not None and (checkpoint_of(note).size, checkpoint_of(note).root_hash) != (
        size,
        root,
    ):
        note = None  # the mirror's checkpoint file is not the one verified: record none
    read = None if local is None else _reader(local, size)
    return _Verified(read, size, note, problems, outcome.report.keys_pinned, root=root)


def _verify_dir(opts: ReplayOptions, held: list[bytes], bar: Progress) -> _Verified:
    from saihm.audit.mirror import held_notes
    from saihm.audit.mirrorstate import DIRNAME, MirrorState
    from saihm.audit.sync import sync, tree_of

    source = DirSource(opts.source)
    keys = _trust(opts.trust)
    theirs = Path(opts.source, DIRNAME, "keys.txt")
    if keys is None and theirs.exists():
        keys = [k.strip() for k in theirs.read_text().splitlines() if k.strip()]
    with MirrorState(Path(opts.out) / STATE_DIR / "state") as state:
        outcome = sync(
            source,
            state,
            sink=None,
            trust=keys,
            held=[*held_notes(opts.source), *held],
            workers=opts.workers,
            bar=bar,
        )
        with state.begin() as txn:
            tree = tree_of(state, txn)
    size, root = tree.size, tree.root()
    problems = [str(a) for a in outcome.alarms] + [str(f) for f in outcome.report.failures]
    note = source.require("checkpoint") if outcome.adopted else None
    if note is not None and checkpoint_of(note).size != size:
        note = None  # the directory moved on since it was verified: record no checkpoint
    pinned = outcome.report.keys_pinned and opts.trust is not None
    return _Verified(_reader(source, size), size, note, problems, pinned, root=root)


def _reader(source: Source, size: int) -> Reader:
    return lambda start: tiled_leaves(source, size, start)


def tiled_leaves(source: Source, size: int, start: int = 0) -> Iterator[tuple[int, bytes]]:
    """``(index, leaf)`` for leaves ``start`` to ``size - 1`` of a tiled log, from its entry
    bundles (a full bundle serves a partial one's leaves as its prefix)."""
    for n in bundle_range(start, size):
        width = bundle_width(size, n)
        partial = None if width == HASHES_PER_TILE else width
        data = source.get(tile_path(None, n, partial))
        if data is None and partial is not None:
            data = source.get(tile_path(None, n))
        if data is None:
            raise FetchError(f"{source.name}: {tile_path(None, n, partial)} is missing")
        leaves = decode_entry_bundle(data)
        if len(leaves) < width:
            raise FetchError(f"{source.name}: {tile_path(None, n, partial)} is short")
        first = first_leaf(0, n)
        for i in range(max(start - first, 0), width):
            yield first + i, leaves[i]


def _root_of(leaves: list[bytes]) -> bytes:
    tree = TileTree()
    tree.append(leaf_hash(x) for x in leaves)
    return tree.root()


def _mismatch(opts: ReplayOptions, verified: _Verified, held: int) -> str:
    """The one line a replay pass that does not hash to the verified root prints."""
    what = (
        f"the {verified.size} leaves replayed do not hash to the root verified for size "
        f"{verified.size}: {opts.source} changed after it was verified"
    )
    if held:
        what += f", or the {held} events already in {opts.out} are not a prefix of this log"
    return _failed(opts, [f"root: {what}; nothing was written"])


# -- the run ------------------------------------------------------------------------------------


def run(opts: ReplayOptions) -> int:
    """Replay ``opts.source`` into ``opts.out``; print a JSON summary (exit 0), or the failed
    checks (exit 1, nothing written). Unreadable input raises ``SaihmError`` (exit 2)."""
    if opts.format == "parquet":
        need_pyarrow()
    kind = classify(opts.source)
    _CPU_AT_START[0] = time.process_time()
    out = Path(opts.out)
    if opts.format == "lmdb" and out.exists():
        raise SaihmError(
            f"--out {out} exists: the lmdb projections are written once into a new directory "
            "(--format parquet, csv or jsonl append to an existing one)"
        )
    if opts.format in FORMATS:
        check_out(out)
    before = recorded(out) if opts.format in FORMATS else {}
    held = [before["checkpoint"].encode()] if before.get("checkpoint") else []
    started = time.perf_counter()
    with progress(not opts.no_progress) as bar:
        verified = _phase_one(kind, opts, held, bar)
        if verified.problems:
            print(_failed(opts, verified.problems))
            return 1
        assert verified.read is not None
        if opts.format == "lmdb":
            return _lmdb(opts, verified, bar, started)
        return _dataset(opts, verified, bar, started)


def _phase_one(kind: str, opts: ReplayOptions, held: list[bytes], bar: Progress) -> _Verified:
    """Open SOURCE and, unless ``--no-verify``, verify it; return where its leaves are."""
    if kind == "bundle":
        bundle = _bundle(opts.source)
        problems = _verify_bundle(bundle, opts, held, bar) if opts.verify else []
        note = max(bundle.checkpoints)[1] if bundle.checkpoints else None
        every = bundle.leaves

        def read(start: int) -> Iterator[tuple[int, bytes]]:
            return ((i, every[i]) for i in range(start, len(every)))

        # The bundle is one file read once, into memory, verified and replayed from there; its
        # root binds an earlier run's events (a resumed run) to these leaves.
        root = _root_of(every) if opts.verify else None
        verified = _Verified(read, len(every), note, problems, root=root)
        return _with_origin(verified, bundle.origin)
    if kind == "url":
        source: Source = _http(opts.source)
    else:
        source = DirSource(opts.source)
    note, origin, size = _note_origin(source)
    if not opts.verify:
        return _with_origin(_Verified(_reader(source, size), size, note, []), origin)
    verified = _verify_url(opts, held, bar) if kind == "url" else _verify_dir(opts, held, bar)
    return _with_origin(verified, origin)


def _with_origin(verified: _Verified, origin: str) -> _Verified:
    verified.origin = origin
    return verified


def _failed(opts: ReplayOptions, problems: list[str]) -> str:
    body: dict[str, object] = {"source": opts.source, "out": opts.out, "verified": False}
    body.update(written=0, failures=problems[:20], moreFailures=max(0, len(problems) - 20))
    return json.dumps(body)


def _summary(opts: ReplayOptions, extra: dict, started: float, new: int) -> None:
    seconds = time.perf_counter() - started
    cpu = time.process_time() - _CPU_AT_START[0]
    summary = {
        "source": opts.source,
        "out": opts.out,
        "format": opts.format,
        "verified": opts.verify,
        **extra,
        "newEvents": new,
        "seconds": round(seconds, 3),
        "eventsPerSecond": round(new / seconds, 1) if seconds else None,
        # This process's CPU time (worker processes not counted): the rate on a busy machine.
        "cpuSeconds": round(cpu, 3),
    }
    if not opts.verify:
        summary["warning"] = _NO_VERIFY
    print(json.dumps(summary))


def _bound(tree: TileTree, verified: _Verified) -> bool:
    """The leaves replayed (and any held before) are the ones verified: their tree is the
    verified size and, when verified, hashes to the verified root (RFC 6962 leaf hashes)."""
    if tree.size != verified.size:
        return False
    return verified.root is None or tree.root() == verified.root


def _dataset(opts: ReplayOptions, verified: _Verified, bar: Progress, started: float) -> int:
    out = Path(opts.out)
    origin = verified.origin
    data = Dataset.open(out, opts.format, origin)
    try:
        if data.size > verified.size:
            raise SaihmError(
                f"{out} holds {data.size} events but {opts.source} verifies only "
                f"{verified.size}: the log shrank, or this is an older copy of it"
            )
        note = None if verified.note is None else verified.note.decode()
        start, skipped = data.size, 0
        # The tree of the events already held (their right edge, kept by the run that wrote
        # them), else of the source's leaves below ``start`` (hashed, not written again).
        tree = data.tree() or TileTree()
        advance = bar.task("replaying", verified.size - start)
        assert verified.read is not None
        for index, raw in verified.read(tree.size):
            tree.append((leaf_hash(raw),))
            if index < start:
                continue
            leaf = read_leaf(raw)
            if leaf is None:
                skipped += 1
                data.skip(index)
                continue
            data.add(index, leaf)
            if (index + 1) % 1024 == 0:
                advance(1024)
            if data.pending.rows >= COMMIT_EVERY:
                data.flush()
        if data.size != verified.size:
            raise SaihmError(f"{opts.source} ended at leaf {data.size} of {verified.size}")
        if not _bound(tree, verified):
            data.abandon()
            print(_mismatch(opts, verified, start))
            return 1
        data.commit(origin, note, opts.verify, tree.to_bytes())
        tables = data.lifecycle()
    except BaseException:
        data.abandon()  # events flushed by this run are not left behind
        raise
    finally:
        data.close()
    extra = {"events": verified.size, "skipped": skipped, **tables}
    _summary(opts, extra, started, verified.size - start)
    return 0 if skipped == 0 else 1


# -- the LMDB projections -----------------------------------------------------------------------


def _every_tally(derived: Derived) -> list[tuple[bytes, list[int]]]:
    """A tally for every proposal, in log order: one with no VOTE yet tallies 0/0/0, so replay
    counts the proposals ``saihm verify`` counts."""
    return [(pid, derived.tallies.get(pid, [0, 0, 0])) for pid in derived.proposals]


class _Lmdb:
    def __init__(self, out: Path, size_hint: int) -> None:
        # New (run refused an existing --out), but for the verified mirror of a URL source.
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        names = (
            "receipts",
            "by_subject",
            "by_holder",
            "by_operation",
            "holders",
            "erasures",
            "tallies",
            "events",
        )
        size = max(1 << 26, size_hint * 64)
        self.storage = LmdbStorage(out, [n.encode() for n in names], map_size=size)
        self.db = {n: self.storage.namespace(n.encode()) for n in names}
        self.txn = self.storage.write()

    def receipt(self, index: int, r: Receipt, doc: dict) -> None:
        idx, value, put = _U64.pack(index), json.dumps(doc).encode(), self.txn.put
        put(idx, value, db=self.db["receipts"])
        put(r.subject_id + idx, b"", db=self.db["by_subject"])
        put(r.holder_id + idx, b"", db=self.db["by_holder"])
        put(str(r.operation).encode() + b"\x00" + idx, b"", db=self.db["by_operation"])
        if r.operation in _EVENTS:
            put(r.subject_id + idx, value, db=self.db["events"])

    def abandon(self) -> None:
        """Write nothing: the transaction aborted, the LMDB files this run created removed."""
        self.txn.abort()
        self.storage.close()
        for name in ("data.mdb", "lock.mdb"):
            (self.out / name).unlink(missing_ok=True)
        if not any(self.out.iterdir()):
            self.out.rmdir()

    def finish(self, holders: dict, derived: Derived) -> None:
        put = self.txn.put
        for holder, (index, key) in holders.items():
            doc = {"index": index, "publicKey": base64.b64encode(key).decode()}
            put(holder, json.dumps(doc).encode(), db=self.db["holders"])
        for cell, index in derived.erasures.items():
            put(cell, _U64.pack(index), db=self.db["erasures"])
        for pid, (f, a, b) in _every_tally(derived):
            doc = {"for": f, "against": a, "abstain": b}
            put(pid, json.dumps(doc).encode(), db=self.db["tallies"])
        self.txn.commit()
        self.storage.close()


def _lmdb(opts: ReplayOptions, verified: _Verified, bar: Progress, started: float) -> int:
    sink = _Lmdb(Path(opts.out), verified.size)
    derived, holders, skipped, tree = Derived(), {}, 0, TileTree()
    advance = bar.task("replaying", verified.size)
    assert verified.read is not None
    for index, leaf in verified.read(0):
        tree.append((leaf_hash(leaf),))
        try:
            receipt = Receipt.from_cbor(leaf)
        except SaihmError:
            skipped += 1
            continue
        if receipt.operation == Operation.KEY and receipt.holder_id not in holders:
            holders[receipt.holder_id] = (index, receipt.public_key)
        derived.apply(index, receipt)
        sink.receipt(index, receipt, receipt_json(index, receipt))
        if index % 1024 == 1023:
            advance(1024)
    if not _bound(tree, verified):
        sink.abandon()
        print(_mismatch(opts, verified, 0))
        return 1
    sink.finish(holders, derived)
    extra = {
        "events": verified.size,
        "skipped": skipped,
        "erasures": len(derived.erasures),
        "proposals": len(derived.proposals),
    }
    _summary(opts, extra, started, verified.size)
    return 0 if skipped == 0 else 1
