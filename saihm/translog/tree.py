"""``MerkleTree``: the pinned stand-alone API, a ``TreeStorage`` over an environment of its own.

    with MerkleTree(path) as t:
        first = t.append_many([b"...", ...]); t.size; t.root(size=None)
        t.inclusion_proof(index, size); t.consistency_proof(size1, size2)

Each call runs in its own transaction of an LMDB storage (saihm/storage/lmdb.py), so several
processes may open the same directory: appends are serialised by LMDB's writer lock and reads
see the last committed tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from saihm.storage.lmdb import LmdbStorage
from saihm.translog.storage import TreeStorage

__all__ = ["MerkleTree"]

DEFAULT_MAP_SIZE = 1 << 36


class MerkleTree:
    """An append-only RFC 6962 Merkle tree stored in the LMDB directory ``path``.

    ``map_size`` bounds the database size (LMDB reserves address space, not disk). Raises
    ``StorageError`` (an ``Unavailable``) if the environment cannot be opened.
    """

    def __init__(self, path: str | Path, *, map_size: int = DEFAULT_MAP_SIZE) -> None:
        self._env = LmdbStorage(Path(path), TreeStorage.DB_NAMES, map_size=map_size)
        self._storage = TreeStorage(self._env)

    def __enter__(self) -> MerkleTree:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the environment; the object is unusable afterwards."""
        self._env.close()

    @property
    def storage(self) -> TreeStorage:
        """The underlying txn-first storage (for callers that batch several reads)."""
        return self._storage

    @property
    def size(self) -> int:
        """The number of leaves committed so far."""
        with self._env.read() as txn:
            return self._storage.size(txn)

    def append(self, leaf: bytes) -> int:
        """Append one leaf in its own write transaction; return its index."""
        return self.append_many([leaf])

    def append_many(self, leaves: Sequence[bytes]) -> int:
        """Append ``leaves`` in one write transaction; return the index of the first one."""
        with self._env.write() as txn:
            return self._storage.append(txn, leaves)

    def leaf(self, index: int) -> bytes:
        """Return leaf ``index``."""
        with self._env.read() as txn:
            return self._storage.leaf(txn, index)

    def leaves(self, start: int, end: int) -> list[bytes]:
        """Return leaves ``start`` to ``end`` (exclusive)."""
        with self._env.read() as txn:
            return self._storage.leaves(txn, start, end)

    def root(self, size: int | None = None) -> bytes:
        """Return the root at ``size`` (default: the current size)."""
        with self._env.read() as txn:
            return self._storage.root(txn, self._storage.size(txn) if size is None else size)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """Return the RFC 9162 §2.1.3.1 proof of leaf ``index`` in the tree of ``size``."""
        with self._env.read() as txn:
            if size is None:
                size = self._storage.size(txn)
            return self._storage.inclusion_proof(txn, index, size)

    def consistency_proof(self, size1: int, size2: int | None = None) -> list[bytes]:
        """Return the RFC 9162 §2.1.4.1 consistency proof from ``size1`` to ``size2``."""
        with self._env.read() as txn:
            if size2 is None:
                size2 = self._storage.size(txn)
            return self._storage.consistency_proof(txn, size1, size2)

    def tile(self, level: int, index: int, width: int | None = None) -> bytes:
        """Return the byte-exact C2SP tile ``tile/<level>/<index>[.p/<width>]``."""
        with self._env.read() as txn:
            return self._storage.tile(txn, level, index, width)

    def entry_bundle(self, index: int, width: int | None = None) -> bytes:
        """Return the byte-exact entry bundle ``tile/entries/<index>[.p/<width>]``."""
        with self._env.read() as txn:
            return self._storage.entry_bundle(txn, index, width)
