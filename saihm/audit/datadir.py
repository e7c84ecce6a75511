"""Read a data directory's public state straight from its LMDB storage, read-only, without
the store (saihm/storage/lmdb.py opened read-only).

The audit layer may not import ``saihm.store`` or ``saihm.projections`` (DESIGN.md "Layers"):
a verifier must not depend on the code it checks. The stored records it reads (the erasure
list, the tallies and the event bodies) are decoded with their one definition in
saihm/events/records.py; the database and file names are re-declared here, keep them in step
with saihm/store/environment.py (``BODIES``, ``CHECKPOINTS``), saihm/projections/cells.py
(``ERASURES``), saihm/projections/governance.py (``TALLIES``), saihm/config.py (``lmdb``,
``log-keys``, ``authority.pub``) and saihm/translog/storage.py (``leaves``);
tests/audit/test_datadir_layout.py checks that they are. What is read: leaves, checkpoint
notes, the published erasure list and tallies, the log's verifier keys, the authority public
key and, optionally, stored cells and contracts in their wire CBOR. Never DEKs, seeds, session
tags or KEKs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import cbor2

from saihm.audit.bundle import Bundle
from saihm.errors import MalformedInput, NotFound
from saihm.events.records import Body, ErasureRecord, RecordError, Tally, read_u64
from saihm.storage.base import ReadTxn, Storage, StorageError
from saihm.storage.lmdb import LmdbStorage

__all__ = ["DataView", "public_view", "read_data_dir"]

# saihm/config.py
LMDB_SUBDIR = "lmdb"
VERIFIER_KEYS_FILE = "checkpoint-verifier-keys.txt"  # Config.verifier_keys_file
LOG_KEYS_FILE = "log-keys/checkpoint-verifier-keys.txt"
AUTHORITY_PUB = "authority.pub"
# saihm/translog/storage.py TreeStorage.DB_NAMES[0]
LEAVES = b"leaves"
# saihm/store/environment.py
BODIES = b"bodies"  # subjectId -> Body
CHECKPOINTS = b"checkpoints"  # u64 BE size -> signed checkpoint note
# saihm/projections/cells.py, saihm/projections/governance.py
ERASURES = b"p_erasures"  # cellId -> ErasureRecord
TALLIES = b"p_tallies"  # proposalId -> Tally

_NAMES = (LEAVES, BODIES, CHECKPOINTS, ERASURES, TALLIES)


def _open(path: Path, store: str | None = None) -> Storage | LmdbStorage:
    """Open the storage read-only; with reader locks when possible (a server may run). A
    namespace never written reads as empty. ``store``: the data directory's PostgreSQL store
    (``--store URL``), opened read-only in its place."""
    if store is not None:
        from saihm.storage import open_storage

        return open_storage(store, _NAMES, readonly=True)
    if not (path / "data.mdb").exists():
        raise NotFound(f"no LMDB environment at {path}")
    try:
        return LmdbStorage(path, _NAMES, readonly=True)
    except StorageError:
        return LmdbStorage(path, _NAMES, readonly=True, lock=False)


class DataView:
    """The public state of a data directory inside one read snapshot (``public_view``).

    Every iterator reads with a range scan, so nothing is loaded whole: this is what a
    streaming export reads (``bundle.stream_bundle``).
    """

    def __init__(
        self, txn: ReadTxn, storage: Storage | LmdbStorage, log_keys: list[str], authority: bytes
    ) -> None:
        self.txn, self._storage, self.log_keys, self.authority = txn, storage, log_keys, authority
        self.origin = log_keys[0].split("+", 1)[0] if log_keys else ""

    def count(self, name: bytes) -> int:
        """How many records the named database holds (0 if it does not exist)."""
        return self.txn.count(self._storage.namespace(name))

    def _items(self, name: bytes) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self.txn.scan(self._storage.namespace(name)):
            yield bytes(key), bytes(value)

    def leaves(self) -> Iterator[tuple[int, bytes]]:
        """(index, leaf) in key order; the index as stored (-1 for a key that is not a u64)."""
        for key, value in self._items(LEAVES):
            yield (read_u64(key) if len(key) == 8 else -1), value

    def checkpoints(self) -> Iterator[tuple[int, bytes]]:
        """(size, signed note) by size."""
        for key, value in self._items(CHECKPOINTS):
            yield read_u64(key), value

    def erasures(self) -> list[tuple[bytes, int]]:
        """The published erasure list: (cellId, index of its FORGET receipt)."""
        return [(key, ErasureRecord.decode(value).index) for key, value in self._items(ERASURES)]

    def tallies(self) -> list[tuple[bytes, int, int, int]]:
        """The published governance tallies: (proposalId, for, against, abstain)."""
        out = []
        for key, value in self._items(TALLIES):
            t = Tally.decode(value)
            out.append((key, t.votes_for, t.votes_against, t.votes_abstain))
        return out

    def bodies(self) -> Iterator[tuple[bytes, bytes, bool]]:
        """(subjectId, wire CBOR, is a contract) of every stored cell and contract."""
        for key, value in self._items(BODIES):
            obj = _body_object(value)
            yield key, obj, _is_contract(obj)


@contextmanager
def public_view(data_dir: str | Path, *, store: str | None = None) -> Iterator[DataView]:
    """Open a data directory read-only and yield its public state in one read transaction.

    ``store`` names the directory's PostgreSQL store (``--store URL``); None reads
    ``DIR/lmdb``. The node-local files (verifier keys, ``authority.pub``) come from DIR.

    Raises ``NotFound`` if the directory is not a saihm data directory.
    """
    data = Path(data_dir)
    try:
        keys_file = data / VERIFIER_KEYS_FILE
        if not keys_file.exists():  # data directories made before the keys could live elsewhere
            keys_file = data / LOG_KEYS_FILE
        log_keys = [line.strip() for line in keys_file.read_text().splitlines() if line.strip()]
        authority = (data / AUTHORITY_PUB).read_bytes()
    except FileNotFoundError as err:
        raise NotFound(f"{data} is not a saihm data directory: {err.filename}") from err
    storage = _open(data / LMDB_SUBDIR, store)
    try:
        with storage.read() as txn:
            yield DataView(txn, storage, log_keys, authority)
    finally:
        storage.close()


def read_data_dir(
    data_dir: str | Path, *, with_cells: bool = False, store: str | None = None
) -> Bundle:
    """Build a :class:`Bundle` from a data directory, read in one read snapshot.

    Leaves are read in key order; a gap in the indexes (a deleted leaf) is recorded in
    ``read_problems`` and the bundle carries the leaves that are there, so verification fails.
    Raises ``NotFound`` if the directory is not a saihm data directory. ``store``: as for
    :func:`public_view`.
    """
    with public_view(data_dir, store=store) as view:
        problems: list[tuple[int, str]] = []
        leaves: list[bytes] = []
        for index, value in view.leaves():
            if index != len(leaves) + len(problems) and not problems:
                problems.append((len(leaves), f"leaf {len(leaves)} is missing"))
            leaves.append(value)
        checkpoints = list(view.checkpoints())
        erasures, tallies = view.erasures(), view.tallies()
        cells: list[tuple[bytes, bytes]] | None = [] if with_cells else None
        contracts: list[tuple[bytes, bytes]] | None = [] if with_cells else None
        if with_cells:
            for key, obj, is_contract in view.bodies():
                (contracts if is_contract else cells).append((key, obj))  # type: ignore[union-attr]
        origin, log_keys, authority = view.origin, view.log_keys, view.authority
    return Bundle(
        origin=origin,
        leaves=leaves,
        checkpoints=checkpoints,
        log_keys=log_keys,
        authority_public_key=authority,
        erasures=erasures,
        erasures_tree_size=len(leaves),
        tallies=tallies,
        cells=cells,
        contracts=contracts,
        read_problems=problems,
    )


def _body_object(raw: bytes) -> bytes:
    """The wire CBOR of the cell or contract inside a stored body (key 1); nothing else."""
    try:
        return Body.decode(raw).object_cbor
    except RecordError as err:
        raise MalformedInput(f"{err}") from err


def _is_contract(obj: bytes) -> bool:
    """Contracts are maps with keys 1..10, cells with keys 1..8 (saihm-protocol "Wire formats")."""
    try:
        m = cbor2.loads(obj)
    except cbor2.CBORDecodeError:
        return False
    return isinstance(m, dict) and 10 in m
