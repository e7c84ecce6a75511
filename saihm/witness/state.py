"""A witness's durable state: per origin, the size and root hash of the latest cosigned
checkpoint (c2sp.org/tlog-witness: "the witness is only required to keep track of the latest
checkpoint it observed and verified").

The record lives in an LMDB storage (saihm/storage/lmdb.py) in the state directory. LMDB
serialises write
transactions across processes and syncs each commit to disk before it returns, so
:meth:`WitnessState.advance` checks the old size and stores the new checkpoint atomically, as
the spec requires ("checking the old size against the latest checkpoint and persisting the new
checkpoint must be performed atomically"), even with two witness processes on one directory.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from saihm.storage.lmdb import LmdbStorage

__all__ = ["Head", "WitnessState"]

_HEADS = b"heads"  # SHA-256(origin) -> u64 size || 32-byte root || origin (UTF-8)
_EVIDENCE = b"evidence"  # u64 sequence -> refused request body (proof of log misbehaviour)
_MAX_EVIDENCE = 10_000


@dataclass(frozen=True, slots=True)
class Head:
    """The latest cosigned checkpoint of one log."""

    origin: str
    size: int
    root_hash: bytes

    def encode(self) -> bytes:
        return struct.pack(">Q", self.size) + self.root_hash + self.origin.encode()

    @classmethod
    def decode(cls, raw: bytes) -> Head:
        if len(raw) < 40:
            raise ValueError("witness state record is truncated")
        return cls(raw[40:].decode(), struct.unpack(">Q", raw[:8])[0], bytes(raw[8:40]))


class WitnessState:
    """Per-origin heads in ``<directory>/lmdb``; safe to share between processes."""

    def __init__(
        self, directory: str | Path, *, map_size: int = 1 << 30, sync: bool = True
    ) -> None:
        """Open (creating) the state. ``sync=False`` skips the fsync of each commit and is
        for ``saihm bench witness`` only: a witness must persist before it answers."""
        path = Path(directory) / "lmdb"
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.storage = LmdbStorage(path, (_HEADS, _EVIDENCE), map_size=map_size, sync=sync)
        self._heads = self.storage.namespace(_HEADS)
        self._evidence = self.storage.namespace(_EVIDENCE)

    def close(self) -> None:
        """Close the storage."""
        self.storage.close()

    @staticmethod
    def _key(origin: str) -> bytes:
        return hashlib.sha256(origin.encode()).digest()

    def head(self, origin: str) -> Head | None:
        """The latest cosigned checkpoint of ``origin``, or None if never cosigned."""
        with self.storage.read() as txn:
            raw = txn.get(self._key(origin), db=self._heads)
        return None if raw is None else Head.decode(bytes(raw))

    def advance(self, origin: str, decide: Callable[[Head | None], Head]) -> Head:
        """Call ``decide(current head)`` inside one write transaction and store what it
        returns; if it raises, nothing is stored. The commit is on disk when this returns."""
        with self.storage.write() as txn:
            raw = txn.get(self._key(origin), db=self._heads)
            current = None if raw is None else Head.decode(bytes(raw))
            new = decide(current)
            txn.put(self._key(origin), new.encode(), db=self._heads)
        return new

    def record_evidence(self, body: bytes) -> None:
        """Keep a refused, validly signed request (tlog-witness: "MAY log the request even if
        the consistency proof doesn't verify ... as it might be proof of log misbehavior")."""
        with self.storage.write() as txn:
            if txn.count(self._evidence) >= _MAX_EVIDENCE:
                return
            newest = txn.last(self._evidence)
            last = 0 if newest is None else struct.unpack(">Q", newest[0])[0] + 1
            txn.put(struct.pack(">Q", last), body, db=self._evidence)

    def evidence(self) -> list[bytes]:
        """Every refused request kept as evidence, oldest first."""
        with self.storage.read() as txn:
            return [bytes(v) for _, v in txn.scan(self._evidence)]
