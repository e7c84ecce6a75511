"""The public log: checkpoints signed and stored, and every public read of the log.

DESIGN.md "HTTP" (the public, read-only log API). Every read runs inside one read snapshot of
the storage, so a response describes one consistent tree size (entries and the size that covers
them). Nothing here is secret: leaves, proofs, tiles, receipts, checkpoints and the erasure list
are public by design. Checkpoints are C2SP signed notes (c2sp.org/tlog-checkpoint) with witness
cosignatures appended (c2sp.org/tlog-cosignature).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice

from saihm.errors import NotFound
from saihm.projections import apply as P
from saihm.projections import u64
from saihm.projections.keys import read_u64
from saihm.storage import ReadTxn
from saihm.store.environment import CHECKPOINTS, Environment
from saihm.translog import Checkpoint
from saihm.translog.note import parse_note
from saihm.translog.witness import append_cosignatures


class PublicLog:
    """The log's checkpoints and public reads over an :class:`Environment`."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        #: When this process last signed a checkpoint (the store's clock; 0.0 before the first).
        self.last_signed = 0.0

    def checkpoint_now(self) -> bytes:
        """Sign a checkpoint for the current size if none exists yet; return the latest note.

        Nodes sharing a store may sign the same size at once: the first note stored wins and
        both return it (docs/scaling.md "Several nodes, one log")."""
        env = self.env
        with env.storage.read() as txn:
            size = env.tree.size(txn)
            latest = self.latest_stored(txn)
            if latest is not None and latest[0] >= size:
                return latest[1]
            root = env.tree.root(txn, size)
        stamp = int(env.clock())
        note = env.log_keys.sign(Checkpoint(env.origin, size, root), timestamp=stamp)
        with env.storage.write() as txn:
            if not txn.put(u64(size), note, db=env.db[CHECKPOINTS], overwrite=False):
                # Another process or node signed this size first: the stored note is the one
                # every reader sees, so it is the one returned (and published).
                note = txn.get(u64(size), db=env.db[CHECKPOINTS]) or note
            env.fault("checkpoint")
        self.last_signed = env.clock()
        return note

    def add_cosignatures(self, size: int, lines: Sequence[bytes]) -> bytes:
        """Append witness cosignature lines (c2sp.org/tlog-cosignature) to the stored
        checkpoint of ``size`` and return the note; lines of keys it carries are skipped.

        The caller has verified them (saihm/witness/submit.py). Raises ``NotFound`` if no
        checkpoint of that size is stored, ``NoteError`` for a malformed line.
        """
        db = self.env.db[CHECKPOINTS]
        with self.env.storage.write() as txn:
            note = txn.get(u64(size), db=db)
            if note is None:
                raise NotFound("no checkpoint of that size")
            merged = append_cosignatures(bytes(note), lines)
            if merged != note:
                txn.put(u64(size), merged, db=db)
        return merged

    def latest_stored(self, txn: ReadTxn) -> tuple[int, bytes] | None:
        """(size, note) of the newest stored checkpoint in ``txn``, or None."""
        last = txn.last(self.env.db[CHECKPOINTS])
        if last is None:
            return None
        return read_u64(last[0]), bytes(last[1])

    def latest_witnessed_checkpoint(self, scan: int = 4096) -> bytes | None:
        """The newest stored checkpoint that carries a signature line under another name than
        the log's origin (a witness cosignature), looking back at most ``scan`` checkpoints;
        or None."""
        with self.env.storage.read() as txn:
            for _, value in islice(txn.scan(self.env.db[CHECKPOINTS], reverse=True), scan):
                note = bytes(value)
                # The log signs with two lines; only a note with more can carry a cosignature.
                if note.count(b"\n\xe2\x80\x94 ") > 2:
                    origin = note.split(b"\n", 1)[0].decode()
                    if any(s.name != origin for s in parse_note(note)[1]):
                        return note
        return None

    def checkpoints(self) -> Iterator[tuple[int, bytes]]:
        """Every stored checkpoint, by size."""
        with self.env.storage.read() as txn:
            for key, value in txn.scan(self.env.db[CHECKPOINTS]):
                yield read_u64(key), bytes(value)

    def size(self) -> int:
        """The number of leaves in the log."""
        with self.env.storage.read() as txn:
            return self.env.tree.size(txn)

    def leaves(self, start: int, end: int) -> list[bytes]:
        """Leaves ``start`` (inclusive) to ``end`` (exclusive)."""
        with self.env.storage.read() as txn:
            return self.env.tree.leaves(txn, start, end)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """RFC 9162 inclusion proof of leaf ``index`` in the tree of ``size`` leaves."""
        with self.env.storage.read() as txn:
            return self.env.tree.inclusion_proof(txn, index, size)

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        """RFC 9162 consistency proof between two tree sizes."""
        with self.env.storage.read() as txn:
            return self.env.tree.consistency_proof(txn, size1, size2)

    def root(self, size: int) -> bytes:
        """The root hash at ``size``."""
        with self.env.storage.read() as txn:
            return self.env.tree.root(txn, size)

    def tile(self, level: int, index: int, width: int | None) -> bytes:
        """A C2SP tlog-tiles hash tile, byte-exact."""
        with self.env.storage.read() as txn:
            return self.env.tree.tile(txn, level, index, width)

    def entry_bundle(self, index: int, width: int | None) -> bytes:
        """A C2SP tlog-tiles entry bundle, byte-exact."""
        with self.env.storage.read() as txn:
            return self.env.tree.entry_bundle(txn, index, width)

    def receipt(self, receipt_id: bytes) -> tuple[int, bytes]:
        """(leaf index, leaf) of a receipt, or :class:`NotFound`."""
        with self.env.storage.read() as txn:
            raw = txn.get(receipt_id, db=self.env.projections.db[P.RECEIPT_IDS])
            if raw is None:
                raise NotFound("no such receipt", code="receipt_not_found")
            index = read_u64(raw)
            return index, self.env.tree.leaf(txn, index)

    def receipts(
        self, by: str, value: bytes, cursor: int = 0, limit: int = 100
    ) -> tuple[list[tuple[int, bytes]], int | None]:
        """Receipts by subjectId, holderId or operation, in log order, from leaf ``cursor``."""
        names = {"subjectId": P.BY_SUBJECT, "holderId": P.RX_BY_HOLDER, "operation": P.BY_OPERATION}
        prefix = value + b"\x00" if by == "operation" else value
        out: list[tuple[int, bytes]] = []
        with self.env.storage.read() as txn:
            db = self.env.projections.db[names[by]]
            for key, _ in txn.scan(db, prefix + u64(cursor), prefix=prefix):
                if len(key) != len(prefix) + 8:
                    break
                index = read_u64(key[len(prefix) :])
                if len(out) == limit:
                    return out, index
                out.append((index, self.env.tree.leaf(txn, index)))
        return out, None

    def erasures(self) -> tuple[list[bytes], int]:
        """The public erasure list and the tree size it reflects."""
        with self.env.storage.read() as txn:
            size = self.env.tree.size(txn)
            ids = [bytes(k) for k, _ in self.env.projections.items(txn, P.ERASURES)]
        return ids, size
