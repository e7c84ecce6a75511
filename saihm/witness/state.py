"""A witness's durable state: per origin, the size and root hash of the latest cosigned
checkpoint (c2sp.org/tlog-witness: "the witness is only required to keep track of the latest
checkpoint it observed and verified").

The record lives in an LMDB storage (saihm/storage/lmdb.py) in the state directory. LMDB
serialises write transactions across processes and syncs each commit to disk before it
returns, so :meth:`WitnessState.advance` checks the old size and stores the new checkpoint
atomically, as the spec requires ("checking the old size against the latest checkpoint and
persisting the new checkpoint must be performed atomically"), even with two witness processes
on one directory.

Beside the heads it keeps evidence: refused requests that show a genuine conflict with a
validly signed checkpoint (:meth:`WitnessState.record_evidence`), one record per checkpoint,
within a bound in bytes and in records (:data:`MAX_EVIDENCE_BYTES`,
:data:`MAX_EVIDENCE_RECORDS`); past it new evidence is counted, not kept. A record is deleted
only when the witness later cosigns its very checkpoint, which proves that the proof it
carried was wrong, not the log (:meth:`WitnessState.advance`).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saihm.storage.lmdb import LmdbStorage

__all__ = [
    "MAX_EVIDENCE_BYTES",
    "MAX_EVIDENCE_RECORDS",
    "EvidenceUsage",
    "Head",
    "WitnessState",
]

_HEADS = b"heads"  # SHA-256(origin) -> u64 size || 32-byte root || origin (UTF-8)
_EVIDENCE = b"evidence"  # u64 sequence -> refused request (proof of log misbehaviour)
_EVIDENCE_KEYS = b"evidence-keys"  # SHA-256(checkpoint text) -> u64 sequence (one per checkpoint)
_COUNTERS = b"counters"  # name -> u64
_BYTES = b"evidence-bytes"  # the bytes of every evidence record, the key included
_DROPPED = b"evidence-dropped"  # evidence refused because the store was full
#: The evidence store's bounds: records are not evicted to make room, so past either bound
#: new evidence is refused (and counted, :attr:`EvidenceUsage.dropped`). A record is at most
#: the 64 KiB request limit, usually 3-10 KB.
MAX_EVIDENCE_BYTES = 16 << 20
MAX_EVIDENCE_RECORDS = 10_000


@dataclass(frozen=True, slots=True)
class EvidenceUsage:
    """What the evidence store holds, and how much evidence it had to refuse."""

    records: int
    bytes: int
    dropped: int
    max_bytes: int
    max_records: int


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
        self,
        directory: str | Path,
        *,
        map_size: int = 1 << 30,
        sync: bool = True,
        max_evidence_bytes: int = MAX_EVIDENCE_BYTES,
        max_evidence_records: int = MAX_EVIDENCE_RECORDS,
    ) -> None:
        """Open (creating) the state. ``sync=False`` skips the fsync of each commit and is
        for ``saihm bench witness`` only: a witness must persist before it answers."""
        path = Path(directory) / "lmdb"
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.storage = LmdbStorage(
            path, (_HEADS, _EVIDENCE, _EVIDENCE_KEYS, _COUNTERS), map_size=map_size, sync=sync
        )
        self._heads = self.storage.namespace(_HEADS)
        self._evidence = self.storage.namespace(_EVIDENCE)
        self._evidence_keys = self.storage.namespace(_EVIDENCE_KEYS)
        self._counters = self.storage.namespace(_COUNTERS)
        self.max_evidence_bytes = max_evidence_bytes
        self.max_evidence_records = max_evidence_records

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

    def advance(
        self,
        origin: str,
        decide: Callable[[Head | None], Head],
        *,
        checkpoint_text: bytes | None = None,
    ) -> Head:
        """Call ``decide(current head)`` inside one write transaction and store what it
        returns; if it raises, nothing is stored. The commit is on disk when this returns.

        ``checkpoint_text`` is the text of the checkpoint being cosigned: cosigning it proves
        it consistent with every head before, so an evidence record of it (a request with a
        proof that failed, :meth:`record_evidence`) showed no fork and is deleted in the same
        transaction."""
        with self.storage.write() as txn:
            raw = txn.get(self._key(origin), db=self._heads)
            current = None if raw is None else Head.decode(bytes(raw))
            new = decide(current)
            txn.put(self._key(origin), new.encode(), db=self._heads)
            if checkpoint_text is not None:
                self._clear_evidence(txn, hashlib.sha256(checkpoint_text).digest())
        return new

    def _clear_evidence(self, txn: Any, key: bytes) -> None:
        seq = txn.get(key, db=self._evidence_keys)
        if seq is None:
            return
        record = txn.get(bytes(seq), db=self._evidence)
        used = self._used_bytes(txn)
        if record is not None:
            txn.delete(bytes(seq), db=self._evidence)
            used -= 8 + len(record)
        txn.delete(key, db=self._evidence_keys)
        txn.put(_BYTES, struct.pack(">Q", max(used, 0)), db=self._counters)

    def record_evidence(self, checkpoint_text: bytes, record: bytes) -> str:
        """Keep ``record``, a refused request that shows a conflict with a validly signed
        checkpoint (tlog-witness: "MAY log the request even if the consistency proof doesn't
        verify ... as it might be proof of log misbehavior"), once per checkpoint.

        Returns ``"kept"``, ``"duplicate"`` (a record of this checkpoint text is kept already;
        nothing changes) or ``"full"`` (keeping it would pass :attr:`max_evidence_bytes` or
        :attr:`max_evidence_records`: nothing is kept, the ``dropped`` count goes up). Raises
        ``StorageError`` when the state cannot be written.
        """
        key = hashlib.sha256(checkpoint_text).digest()
        with self.storage.write() as txn:
            if txn.get(key, db=self._evidence_keys) is not None:
                return "duplicate"
            used = self._used_bytes(txn)
            records = txn.count(self._evidence)
            size = 8 + len(record)
            if used + size > self.max_evidence_bytes or records >= self.max_evidence_records:
                dropped = self._counter(txn, _DROPPED)
                txn.put(_DROPPED, struct.pack(">Q", dropped + 1), db=self._counters)
                return "full"
            newest = txn.last(self._evidence)
            seq = struct.pack(">Q", 0 if newest is None else struct.unpack(">Q", newest[0])[0] + 1)
            txn.put(seq, record, db=self._evidence)
            txn.put(key, seq, db=self._evidence_keys)
            txn.put(_BYTES, struct.pack(">Q", used + size), db=self._counters)
        return "kept"

    def _counter(self, txn: Any, name: bytes) -> int:
        raw = txn.get(name, db=self._counters)
        return 0 if raw is None else int(struct.unpack(">Q", bytes(raw))[0])

    def _used_bytes(self, txn: Any) -> int:
        """The evidence bytes; counted once from the records themselves where a state from
        before the byte count was kept holds some (they count toward the bound too)."""
        raw = txn.get(_BYTES, db=self._counters)
        if raw is not None:
            return int(struct.unpack(">Q", bytes(raw))[0])
        return sum(8 + len(v) for _, v in txn.scan(self._evidence))

    def evidence_usage(self) -> EvidenceUsage:
        """How many evidence records and bytes are kept, and how many were refused as the
        store was full."""
        with self.storage.read() as txn:
            return EvidenceUsage(
                txn.count(self._evidence),
                self._used_bytes(txn),
                self._counter(txn, _DROPPED),
                self.max_evidence_bytes,
                self.max_evidence_records,
            )

    def evidence(self) -> list[bytes]:
        """Every evidence record, oldest first."""
        with self.storage.read() as txn:
            return [bytes(v) for _, v in txn.scan(self._evidence)]
