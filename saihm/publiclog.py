"""The public log's reads (DESIGN.md "HTTP": the public, read-only log API).

Mixed into :class:`saihm.store.Store`; every read runs inside one read snapshot of the storage, so a
response describes one consistent tree size. Nothing here is secret: leaves, proofs, tiles,
receipts, checkpoints and the erasure list are public by design.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

from saihm.errors import NotFound
from saihm.projections import Projections, u64
from saihm.projections import apply as P
from saihm.projections.keys import read_u64
from saihm.storage.base import Namespace, ReadTxn, Storage
from saihm.translog import TreeStorage

CHECKPOINTS = b"checkpoints"  # tree size u64 -> signed checkpoint note


class PublicLog:
    """Reads of the public log over the store's storage."""

    storage: Storage
    tree: TreeStorage
    projections: Projections
    _db: dict[bytes, Namespace]

    def checkpoint_now(self) -> bytes:
        raise NotImplementedError

    def _latest_checkpoint(self, txn: ReadTxn) -> tuple[int, bytes] | None:
        last = txn.last(self._db[CHECKPOINTS])
        if last is None:
            return None
        return read_u64(last[0]), last[1]

    def latest_checkpoint(self) -> bytes:
        """The newest signed checkpoint (signing one first if the log has none)."""
        with self.storage.read() as txn:
            latest = self._latest_checkpoint(txn)
        return self.checkpoint_now() if latest is None else latest[1]

    def latest_witnessed_checkpoint(self, scan: int = 4096) -> bytes | None:
        """The newest stored checkpoint that carries a signature line under another name than
        the log's origin (a witness cosignature), looking back at most ``scan`` checkpoints;
        or None."""
        from saihm.translog.note import parse_note

        with self.storage.read() as txn:
            for _, value in islice(txn.scan(self._db[CHECKPOINTS], reverse=True), scan):
                note = bytes(value)
                # The log signs with two lines; only a note with more can carry a cosignature.
                if note.count(b"\n\xe2\x80\x94 ") > 2:
                    origin = note.split(b"\n", 1)[0].decode()
                    if any(s.name != origin for s in parse_note(note)[1]):
                        return note
        return None

    def checkpoints(self) -> Iterator[tuple[int, bytes]]:
        """Every stored checkpoint, by size."""
        with self.storage.read() as txn:
            for key, value in txn.scan(self._db[CHECKPOINTS]):
                yield read_u64(key), bytes(value)

    def size(self) -> int:
        """The number of leaves in the log."""
        with self.storage.read() as txn:
            return self.tree.size(txn)

    def leaves(self, start: int, end: int) -> list[bytes]:
        """Leaves ``start`` (inclusive) to ``end`` (exclusive)."""
        with self.storage.read() as txn:
            return self.tree.leaves(txn, start, end)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """RFC 9162 inclusion proof of leaf ``index`` in the tree of ``size`` leaves."""
        with self.storage.read() as txn:
            return self.tree.inclusion_proof(txn, index, size)

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        """RFC 9162 consistency proof between two tree sizes."""
        with self.storage.read() as txn:
            return self.tree.consistency_proof(txn, size1, size2)

    def root(self, size: int) -> bytes:
        """The root hash at ``size``."""
        with self.storage.read() as txn:
            return self.tree.root(txn, size)

    def tile(self, level: int, index: int, width: int | None) -> bytes:
        """A C2SP tlog-tiles hash tile, byte-exact."""
        with self.storage.read() as txn:
            return self.tree.tile(txn, level, index, width)

    def entry_bundle(self, index: int, width: int | None) -> bytes:
        """A C2SP tlog-tiles entry bundle, byte-exact."""
        with self.storage.read() as txn:
            return self.tree.entry_bundle(txn, index, width)

    def receipt(self, receipt_id: bytes) -> tuple[int, bytes]:
        """(leaf index, leaf) of a receipt, or :class:`NotFound`."""
        with self.storage.read() as txn:
            raw = txn.get(receipt_id, db=self.projections.db[P.RECEIPT_IDS])
            if raw is None:
                raise NotFound("no such receipt", code="receipt_not_found")
            index = read_u64(raw)
            return index, self.tree.leaf(txn, index)

    def receipts(
        self, by: str, value: bytes, cursor: int = 0, limit: int = 100
    ) -> tuple[list[tuple[int, bytes]], int | None]:
        """Receipts by subjectId, holderId or operation, in log order, from leaf ``cursor``."""
        names = {"subjectId": P.BY_SUBJECT, "holderId": P.RX_BY_HOLDER, "operation": P.BY_OPERATION}
        prefix = value + b"\x00" if by == "operation" else value
        out: list[tuple[int, bytes]] = []
        with self.storage.read() as txn:
            db = self.projections.db[names[by]]
            for key, _ in txn.scan(db, prefix + u64(cursor), prefix=prefix):
                if len(key) != len(prefix) + 8:
                    break
                index = read_u64(key[len(prefix) :])
                if len(out) == limit:
                    return out, index
                out.append((index, self.tree.leaf(txn, index)))
        return out, None

    def erasures(self) -> tuple[list[bytes], int]:
        """The public erasure list and the tree size it reflects."""
        with self.storage.read() as txn:
            size = self.tree.size(txn)
            ids = [bytes(k) for k, _ in self.projections.items(txn, P.ERASURES)]
        return ids, size
