"""What a mirror remembers between runs, in ``DIR/.saihm-mirror/`` (one LMDB environment).

Named databases, each committed in the same write transaction as the tiles it accounts for:

- ``meta``: ``tree`` → the verified prefix (``TileTree.to_bytes``); ``held`` → the signed note
  of the newest adopted checkpoint; ``target`` → the note being mirrored when a run stopped
  (the log signed it, so a later, smaller checkpoint is a rollback); ``pinned`` → b"1" if the
  verifier keys were pinned with ``--trust``;
- ``holders``: holderId → ML-DSA-65 public key, from the holder's KEY receipt;
- ``receipts``: receiptId → leaf index (u64), so a repeated receipt is caught across runs;
- ``erasures``: cellId → index of the first FORGET receipt naming it.

``keys.txt`` beside the environment lists the verifier keys in use, one per line. An exclusive
``flock`` on ``lock`` serialises mirror runs over one directory (a second run waits). Memory stays
bounded: these maps live on disk, and only one batch of entry bundles is in memory at a time.
"""

from __future__ import annotations

import fcntl
import struct
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

from saihm.errors import Unavailable
from saihm.storage.base import Namespace, ReadTxn, StorageError, WriteTxn
from saihm.storage.lmdb import LmdbStorage

__all__ = ["LmdbMap", "MirrorState"]

V = TypeVar("V")
_U64 = struct.Struct(">Q")
DIRNAME = ".saihm-mirror"


class LmdbMap(MutableMapping[bytes, V], Generic[V]):
    """A mapping over one namespace inside one open write transaction."""

    def __init__(
        self,
        txn: WriteTxn,
        db: Namespace,
        encode: Callable[[V], bytes],
        decode: Callable[[bytes], V],
    ) -> None:
        self._txn, self._db, self._encode, self._decode = txn, db, encode, decode

    def __getitem__(self, key: bytes) -> V:
        value = self._txn.get(key, db=self._db)
        if value is None:
            raise KeyError(key)
        return self._decode(bytes(value))

    def __setitem__(self, key: bytes, value: V) -> None:
        self._txn.put(key, self._encode(value), db=self._db)

    def __delitem__(self, key: bytes) -> None:
        if not self._txn.delete(key, db=self._db):
            raise KeyError(key)

    def __iter__(self) -> Iterator[bytes]:
        for key, _ in self._txn.scan(self._db):
            yield bytes(key)

    def __len__(self) -> int:
        return self._txn.count(self._db)


def _u64(n: int) -> bytes:
    return _U64.pack(n)


def _from_u64(raw: bytes) -> int:
    return _U64.unpack(raw)[0]


def _same(raw: bytes) -> bytes:
    return raw


class MirrorState:
    """The state directory of one mirror (see the module docstring); use as a context manager."""

    def __init__(self, directory: str | Path, *, map_size: int = 1 << 34) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = (self.dir / "lock").open("a")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        names = (b"meta", b"holders", b"receipts", b"erasures")
        try:
            self.storage = LmdbStorage(self.dir / "lmdb", names, map_size=map_size)
        except StorageError as err:
            self._lock.close()
            raise Unavailable(f"cannot open the mirror state in {self.dir}: {err}") from err
        self._dbs = {name: self.storage.namespace(name) for name in names}

    def __enter__(self) -> MirrorState:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the storage and release the lock."""
        self.storage.close()
        self._lock.close()

    def begin(self) -> WriteTxn:
        """A write transaction (commit it with the tiles it accounts for)."""
        return self.storage.write()

    def meta(self, txn: ReadTxn, key: bytes) -> bytes | None:
        value = txn.get(key, db=self._dbs[b"meta"])
        return None if value is None else bytes(value)

    def set_meta(self, txn: WriteTxn, key: bytes, value: bytes | None) -> None:
        if value is None:
            txn.delete(key, db=self._dbs[b"meta"])
        else:
            txn.put(key, value, db=self._dbs[b"meta"])

    def holders(self, txn: WriteTxn) -> LmdbMap[bytes]:
        return LmdbMap(txn, self._dbs[b"holders"], _same, _same)

    def receipts(self, txn: WriteTxn) -> LmdbMap[int]:
        return LmdbMap(txn, self._dbs[b"receipts"], _u64, _from_u64)

    def erasures(self, txn: WriteTxn) -> LmdbMap[int]:
        return LmdbMap(txn, self._dbs[b"erasures"], _u64, _from_u64)

    def keys(self) -> list[str] | None:
        """The verifier keys this mirror uses, or None before the first run."""
        path = self.dir / "keys.txt"
        if not path.exists():
            return None
        return [k.strip() for k in path.read_text().splitlines() if k.strip()]

    def save_keys(self, keys: list[str]) -> None:
        tmp = self.dir / "keys.txt.tmp"
        tmp.write_text("".join(k + "\n" for k in keys))
        tmp.replace(self.dir / "keys.txt")
