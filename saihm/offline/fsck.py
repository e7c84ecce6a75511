"""The private half of ``saihm verify --data DIR``: a complete check of what only the operator sees.

``saihm verify`` (saihm/audit) checks the public log and needs nothing the operator keeps
private. This module is the operator's own check, run beside the store on its files (saihm.offline
sits above saihm.store; DESIGN.md "Layers": audit/ may not import the store, the keyring or the
projections) and checks, in one read snapshot of the storage (any driver:
saihm/storage) and with the KEK directory, everything a person with direct database access
could damage or forge (docs/operations.md "What `verify --data` checks"):

1. the projections reflect the whole log (the applied index equals the tree size), in the
   current schema version (saihm/events/records.py);
2. every projection database is byte-identical to a fresh rebuild from the log, and every
   MAC-bound record carries its record MAC (saihm/projections/seal.py);
3. the stored tiles are byte-identical to tiles recomputed from the leaves;
4. every live cell (REMEMBER without FORGET) has its body, whose cellId and signature verify
   under the KEY receipt's public key, and a wrapped DEK that unwraps under a live KEK
   generation and opens the ciphertext; every memo entry matches its cell;
5. every erased cell (FORGET in the log) has no wrapped DEK;
6. every holder with a KEY receipt has a wrapped seed that unwraps and derives that KEY's
   public key, and no seed belongs to anyone else;
7. every pending proposal holds a cell that verifies, a DEK that opens it, and names a grant
   its holder made (GRANT) and has not withdrawn (UNGRANT);
8. no wrapped DEK, memo, body or seed exists for something the log does not name.

Each finding names the database, the key (hex) and the check. Nothing here writes to the
store's storage (recomputations go into scratch LMDB storages in temporary directories).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import cbor2

from saihm.config import Config
from saihm.errors import NotFound, SaihmError
from saihm.events import Cell, Contract
from saihm.events.envelope import check_cell_id, verify_cell_signature
from saihm.events.identity import HolderKey
from saihm.events.operations import BY_NAME, Effect
from saihm.keyring.errors import KekUnavailable
from saihm.projections import Body, LeafView, Projections, ProjectionState, StaleProjections
from saihm.projections import apply as P
from saihm.storage.base import Namespace, ReadTxn
from saihm.storage.hint import with_store
from saihm.store import BODIES, MEMO, PENDING, RebuildFailed, Store
from saihm.translog import TreeStorage

__all__ = ["Finding", "FsckResult", "check_data_dir", "check_store", "differences", "private_check"]

Advance = Callable[[int], None]
Tasks = Callable[[str, int], Advance]


@dataclass(frozen=True)
class Finding:
    """One problem: the database, the key (hex) and the check that found it."""

    database: str
    key: str
    check: str
    what: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.database} {self.key[:64]}: {self.what}"


@dataclass
class FsckResult:
    """What the private check covered, and every finding."""

    tree_size: int = 0
    applied: int = 0
    live_cells: int = 0
    erased_cells: int = 0
    holders: int = 0
    pending: int = 0
    projection_records: int = 0
    findings: list[Finding] = field(default_factory=list)

    def add(self, database: bytes | str, key: bytes | str, check: str, what: str) -> None:
        """Record a finding."""
        name = database.decode() if isinstance(database, bytes) else database
        shown = key.hex() if isinstance(key, bytes) else key
        self.findings.append(Finding(name, shown, check, what))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        out = {k: v for k, v in self.__dict__.items() if k != "findings"}
        out["findings"] = [f.__dict__ for f in self.findings]
        return out


def differences(
    live: Projections, live_txn: ReadTxn, fresh: Projections, fresh_txn: ReadTxn
) -> list[tuple[bytes, bytes, str]]:
    """Every (database, key, how) where the live projections differ from a fresh rebuild:
    ``"not in a rebuild"``, ``"missing"`` (the rebuild has it) or ``"value differs"``."""
    out: list[tuple[bytes, bytes, str]] = []
    for name in Projections.DB_NAMES:
        a = _items(live.items(live_txn, name))
        b = _items(fresh.items(fresh_txn, name))
        x, y = next(a, None), next(b, None)
        while x is not None or y is not None:
            if x is not None and (y is None or x[0] < y[0]):
                out.append((name, x[0], "not in a rebuild from the log"))
                x = next(a, None)
            elif y is not None and (x is None or y[0] < x[0]):
                out.append((name, y[0], "missing (a rebuild from the log has it)"))
                y = next(b, None)
            elif x is not None and y is not None:  # the same key on both sides
                if x[1] != y[1]:
                    out.append((name, x[0], "value differs from a rebuild from the log"))
                x, y = next(a, None), next(b, None)
    return out


def _items(pairs: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
    for key, value in pairs:
        yield bytes(key), bytes(value)


@dataclass
class _Log:
    """What the leaves say, read in the fsck's snapshot."""

    keys: dict[bytes, bytes] = field(default_factory=dict)  # holderId -> KEY public key
    remembered: dict[bytes, int] = field(default_factory=dict)  # cellId -> leaf index
    forgotten: set[bytes] = field(default_factory=set)
    shared: set[bytes] = field(default_factory=set)  # contractIds
    grants: dict[bytes, bytes] = field(default_factory=dict)  # grantId -> holderId
    ungranted: set[bytes] = field(default_factory=set)


def _read_log(store: Store, txn: ReadTxn, size: int, advance: Advance) -> _Log:
    seen = _Log()
    effects = {name: spec.effect for name, spec in BY_NAME.items()}
    chunk = 4096
    for start in range(0, size, chunk):
        leaves = store.tree.leaves(txn, start, min(size, start + chunk))
        for offset, leaf in enumerate(leaves):
            try:
                view = LeafView.from_leaf(leaf)
            except (ValueError, KeyError, TypeError, cbor2.CBORDecodeError):
                continue  # the public check reports a leaf that does not decode
            effect, subject = effects.get(view.operation), view.subject_id
            if effect is Effect.KEYS_HOLDER:
                # A KEY leaf without a public key (only a forged one) checks against no key,
                # so every check that needs the key reports the holder.
                key = view.detail if isinstance(view.detail, bytes) else b""
                seen.keys.setdefault(view.holder_id, key)
            elif effect is Effect.WRITES_CELL:
                seen.remembered.setdefault(subject, start + offset)
            elif effect is Effect.ERASES_CELL:
                seen.forgotten.add(subject)
            elif effect is Effect.OPENS_CONTRACT:
                seen.shared.add(subject)
            elif effect is Effect.GRANTS_SESSION:
                seen.grants.setdefault(subject, view.holder_id)
            elif effect is Effect.ENDS_GRANT:
                seen.ungranted.add(subject)
        advance(len(leaves))
    return seen


def check_store(store: Store, tasks: Tasks | None = None) -> FsckResult:
    """Run every private check of the module docstring on ``store`` in one read snapshot."""
    tasks = tasks or (lambda name, total: lambda n: None)
    result = FsckResult()
    storage = store.storage
    bodies, memo, pending = (storage.namespace(name) for name in (BODIES, MEMO, PENDING))
    dbs = {name: storage.namespace(name) for name in (*TreeStorage.DB_NAMES[1:], b"deks", b"seeds")}
    with storage.read() as txn:
        size = result.tree_size = store.tree.size(txn)
        if not _dense_log(txn, storage.namespace(b"leaves"), size, result):
            return _with_store_hints(store, result)
        try:
            state = store.rebuilder.projection_state(txn)
        except StaleProjections as err:
            result.add(P.META, P.APPLIED, "applied index", str(err))
            state = None
        if state is not None:
            _check_meta(state, size, result)
        seen = _read_log(store, txn, size, tasks("reading the log", size))
        _check_projections(store, txn, size, result, tasks)
        _check_tree(store, txn, size, dbs, result, tasks)
        _check_cells(store, txn, seen, bodies, memo, pending, dbs[b"deks"], result, tasks)
        _check_seeds(store, txn, seen, dbs[b"seeds"], result, tasks)
        _check_pending(store, txn, seen, pending, result)
    return _with_store_hints(store, result)


def _with_store_hints(store: Store, result: FsckResult) -> FsckResult:
    """``result`` with ``--store`` in its repair hints when the store is in PostgreSQL
    (saihm/storage/hint.py)."""
    if store.config.store is not None:
        result.findings = [
            replace(f, what=with_store(f.what, store.config.store)) for f in result.findings
        ]
    return result


def _dense_log(txn: ReadTxn, leaves: Namespace, size: int, result: FsckResult) -> bool:
    """Whether the log's leaves are the dense indexes 0 to ``size - 1`` (the tree size is the
    last index plus one). A row inserted far beyond the log, or one deleted from inside it, is
    a finding, and nothing else is checked: every later check reads the log by index, and a
    log of 2**62 "leaves" would never be read to its end."""
    stored = txn.count(leaves)
    if stored == size:
        return True
    result.add(
        b"leaves",
        "",
        "log",
        f"the log's last leaf index is {size - 1} but it holds {stored} leaves: a leaf was "
        "inserted or deleted; the log cannot be checked further",
    )
    return False


def _check_meta(state: ProjectionState, size: int, result: FsckResult) -> None:
    """The applied index equals the tree size, in the current schema version."""
    result.applied = state.applied
    if result.applied != size:
        result.add(
            P.META,
            P.APPLIED,
            "applied index",
            f"the projections reflect {result.applied} entries, the log holds {size}; "
            "run `saihm rebuild --data DIR --replace`",
        )
    if size and state.format != P.PROJECTION_FORMAT:
        result.add(
            P.META,
            P.FORMAT,
            "schema version",
            f"the projections are of format {state.format or 1}, not "
            f"{P.PROJECTION_FORMAT}; run `saihm rebuild --data DIR --replace`",
        )


def _check_projections(
    store: Store, txn: ReadTxn, size: int, result: FsckResult, tasks: Tasks
) -> None:
    seal = store.record_seal
    for name, key, value in store.rebuilder.sealed_rows(txn):
        result.projection_records += 1
        if not seal.valid(name, key, value):
            result.add(
                name,
                key,
                "record MAC",
                "the record MAC is missing or wrong: the record was forged or edited",
            )
    with tempfile.TemporaryDirectory(prefix="saihm-fsck-") as tmp:
        scratch = store.rebuilder.scratch_storage(Path(tmp) / "projections")
        try:
            fresh = Projections(scratch, seal)
            try:
                store.rebuilder.rebuild_from(
                    txn, fresh, size, tasks("rebuilding projections", size)
                )
            except RebuildFailed as err:
                result.add(BODIES, "", "rebuild", f"the projections cannot be rebuilt: {err}")
                return
            with scratch.read() as fresh_txn:
                found = store.rebuilder.compare_live(txn, fresh, fresh_txn, differences)
                for name, key, how in found:
                    result.add(name, key, "rebuild", how)
        finally:
            scratch.close()


def _check_tree(
    store: Store,
    txn: ReadTxn,
    size: int,
    dbs: dict[bytes, Namespace],
    result: FsckResult,
    tasks: Tasks,
) -> None:
    """Recompute every tile and node from the leaves in a scratch LMDB storage; compare."""
    with tempfile.TemporaryDirectory(prefix="saihm-fsck-tree-") as tmp:
        scratch = store.rebuilder.scratch_storage(Path(tmp) / "tree", TreeStorage.DB_NAMES)
        try:
            fresh = TreeStorage(scratch)
            advance = tasks("recomputing tiles", size)
            chunk = 16384
            for start in range(0, size, chunk):
                leaves = store.tree.leaves(txn, start, min(size, start + chunk))
                with scratch.write() as wtxn:
                    fresh.append(wtxn, leaves)
                advance(len(leaves))
            names = TreeStorage.DB_NAMES[1:]
            fresh_dbs = {name: scratch.namespace(name) for name in names}
            with scratch.read() as ftxn:
                for name in names:
                    a = dict(_items(txn.scan(dbs[name])))
                    b = dict(_items(ftxn.scan(fresh_dbs[name])))
                    for key in sorted(a.keys() | b.keys()):
                        if a.get(key) != b.get(key):
                            result.add(
                                name,
                                key,
                                "tiles",
                                "stored tile differs from the tile recomputed from the leaves",
                            )
        finally:
            scratch.close()


def _check_cells(
    store: Store,
    txn: ReadTxn,
    seen: _Log,
    bodies: Namespace,
    memo: Namespace,
    pending: Namespace,
    deks: Namespace,
    result: FsckResult,
    tasks: Tasks,
) -> None:
    keyring = store.keyring
    advance = tasks("checking cells", len(seen.remembered))
    for cell_id in seen.remembered:
        advance(1)
        if cell_id in seen.forgotten:
            result.erased_cells += 1
            if keyring.has_dek(txn, cell_id):
                result.add(
                    b"deks", cell_id, "erased cell", "an erased cell still has a wrapped DEK"
                )
            continue
        result.live_cells += 1
        raw = txn.get(cell_id, db=bodies)
        if raw is None:
            result.add(BODIES, cell_id, "live cell", "a live cell has no stored body")
            continue
        try:
            body = Body.decode(raw)
            cell = Cell.from_cbor(body.object_cbor)
            if cell.cell_id != cell_id:
                raise ValueError("the body holds another cell")
            check_cell_id(cell)
            public_key = seen.keys.get(cell.holder_id)
            if public_key is None:
                raise ValueError("the cell's holder has no KEY receipt")
            verify_cell_signature(cell, public_key)
        except (SaihmError, ValueError, cbor2.CBORDecodeError) as err:
            result.add(
                BODIES, cell_id, "live cell", f"the stored cell does not verify: {_why(err)}"
            )
            continue
        if not store.memo_matches(txn, cell_id, body.object_cbor):
            result.add(MEMO, cell_id, "memo", "the memo does not match the stored cell")
        try:
            store.check_opens(txn, cell)
        except NotFound:
            result.add(b"deks", cell_id, "live cell", "a live cell has no wrapped DEK")
        except KekUnavailable:
            result.add(
                b"deks",
                cell_id,
                "live cell",
                "the DEK is wrapped under a retired or missing KEK generation",
            )
        except SaihmError as err:
            result.add(
                b"deks",
                cell_id,
                "live cell",
                f"the DEK does not unwrap or open the cell: {_why(err)}",
            )
    pending_cells = _pending_cell_ids(txn, pending)
    for key, _ in txn.scan(deks):
        key = bytes(key)
        if key not in seen.remembered and key not in pending_cells:
            result.add(b"deks", key, "orphan", "a wrapped DEK for no cell of the log")
    for name, db, known in (
        (MEMO, memo, seen.remembered),
        (BODIES, bodies, seen.remembered.keys() | seen.shared),
    ):
        for key, _ in txn.scan(db):
            if bytes(key) not in known:
                result.add(name, bytes(key), "orphan", "an entry for nothing the log names")
    for contract_id in seen.shared:
        raw = txn.get(contract_id, db=bodies)
        try:
            if raw is None:
                raise ValueError("missing")
            if Contract.from_cbor(Body.decode(raw).object_cbor).contract_id != contract_id:
                raise ValueError("the body holds another contract")
        except (SaihmError, ValueError, cbor2.CBORDecodeError) as err:
            result.add(BODIES, contract_id, "contract", f"the stored contract: {_why(err)}")


def _pending_cell_ids(txn: ReadTxn, pending: Namespace) -> set[bytes]:
    ids: set[bytes] = set()
    for _, value in txn.scan(pending):
        try:
            ids.add(cbor2.loads(cbor2.loads(bytes(value))[1])[1])
        except (ValueError, KeyError, TypeError, IndexError, cbor2.CBORDecodeError):
            continue
    return ids


def _check_seeds(
    store: Store,
    txn: ReadTxn,
    seen: _Log,
    seeds: Namespace,
    result: FsckResult,
    tasks: Tasks,
) -> None:
    advance = tasks("checking holder seeds", len(seen.keys))
    for holder_id, public_key in seen.keys.items():
        advance(1)
        result.holders += 1
        try:
            derived = HolderKey.from_seed(store.keyring.seed(txn, holder_id)).public_key
        except NotFound:
            result.add(b"seeds", holder_id, "seed", "a holder with a KEY receipt has no seed")
            continue
        except SaihmError as err:
            result.add(b"seeds", holder_id, "seed", f"the seed does not unwrap: {_why(err)}")
            continue
        if derived != public_key:
            result.add(
                b"seeds",
                holder_id,
                "seed",
                "the seed does not derive the public key of the KEY receipt",
            )
    for key, _ in txn.scan(seeds):
        if bytes(key) not in seen.keys:
            result.add(b"seeds", bytes(key), "orphan", "a seed for no holder of the log")


def _check_pending(
    store: Store, txn: ReadTxn, seen: _Log, pending: Namespace, result: FsckResult
) -> None:
    entries = [(bytes(k), bytes(v)) for k, v in txn.scan(pending)]
    for proposal_id, raw in entries:
        result.pending += 1
        try:
            entry = cbor2.loads(raw)
            cell = Cell.from_cbor(entry[1])
            check_cell_id(cell)
            public_key = seen.keys.get(cell.holder_id)
            if public_key is None:
                raise ValueError("the cell's holder has no KEY receipt")
            verify_cell_signature(cell, public_key)
            store.check_opens(txn, cell)
            meta = json.loads(entry[2])
            grant_id = bytes.fromhex(meta["grantId"])
        except (
            SaihmError,
            ValueError,
            KeyError,
            TypeError,
            IndexError,
            cbor2.CBORDecodeError,
        ) as err:
            result.add(
                PENDING, proposal_id, "pending", f"the proposal does not verify: {_why(err)}"
            )
            continue
        if seen.grants.get(grant_id) != cell.holder_id:
            result.add(
                PENDING, proposal_id, "pending", "the proposal names no grant of its cell's holder"
            )
        elif grant_id in seen.ungranted:
            result.add(
                PENDING, proposal_id, "pending", "the proposal's grant was withdrawn (UNGRANT)"
            )


def _why(err: BaseException) -> str:
    return type(err).__name__


def check_data_dir(config: Config, tasks: Tasks | None = None) -> FsckResult:
    """Open the store ``config`` names (its data, KEK and log-keys directories and its
    storage) without the applied-index refusal, run :func:`check_store`, close it without
    writing.

    Raises ``NotFound`` when what the private checks need is absent: the LMDB environment (for
    a store in ``DATA/lmdb``; ``config.store`` may name another storage), the KEK directory
    (never created here) or the log keys (a restored backup holds no KEKs, and a verifier
    without them can run only the public checks). The checks read through the storage
    interface only, so they run on any driver.
    """
    if config.store is None and not (config.lmdb_dir / "data.mdb").exists():
        raise NotFound(f"no LMDB environment in {config.data_dir}")
    if not (config.kek_dir / "state.json").exists():
        raise NotFound(f"no KEK directory at {config.kek_dir} (give --kek-dir)")
    if not config.log_keys_dir.is_dir():
        raise NotFound(f"no log keys at {config.log_keys_dir} (give --log-keys-dir)")
    store = Store(config, check_applied=False)
    try:
        return check_store(store, tasks)
    finally:
        store.storage.close()


def private_check(
    config: Config, tasks: Tasks
) -> tuple[dict[str, Any], list[tuple[str, str, str, str]]]:
    """The ``private`` hook of :func:`saihm.audit.run.verify` (``saihm verify --data``)."""
    result = check_data_dir(config, tasks)
    summary = result.to_json()
    summary.pop("findings")
    return summary, [(f.database, f.key, f.check, f.what) for f in result.findings]
