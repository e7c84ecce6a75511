"""Cells: what the log says of each cell, the candidate indexes, record chains and erasures
(saihm-protocol "Cell shape", "Erasure"; DESIGN.md "Data at rest").

The indexes by holder and by session are untrusted candidate hints: the read path decides on
the verified, decrypted label (saihm/store/read/reader.py). The cell records and record heads are
MAC-bound (saihm/projections/seal.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from saihm.events.operations import Operation
from saihm.events.records import Body, CellRecord, ErasureRecord, RecordHead, read_u64, u64
from saihm.projections.keys import LeafView, loads
from saihm.projections.tables import Handler, Projection, Txn

CELLS = b"p_cells"  # cellId -> CellRecord
BY_HOLDER = b"p_cells_by_holder"  # holderId || u64 index -> cellId (live cells only)
BY_SESSION = b"p_cells_by_session"  # sessionTag || u64 index -> cellId (live cells only)
RECORD_HEADS = b"p_record_heads"  # sessionTag -> RecordHead
ERASURES = b"p_erasures"  # cellId -> ErasureRecord (u64 index of the first FORGET)


def remember_rows(index: int, body: Body | None) -> list[tuple[bytes, bytes, bytes]]:
    """The (database, key, value) rows a REMEMBER at leaf ``index`` writes, values before
    their record MAC: the cell record, its holder index entry and, for a cell with a session
    tag, its session index entry and (record cells) its session's record head. It reads no
    state, so the live apply and the bulk apply (saihm/projections/bulk.py) share it."""
    if body is None:
        raise ValueError(f"REMEMBER at leaf {index} has no stored cell")
    cell = loads(body.object_cbor)
    if not isinstance(cell, dict):
        raise TypeError(f"the cell of the REMEMBER at leaf {index} is not a map")
    cell_id, owner = cell[1], cell[2]
    tag = body.session_tag or b""
    record = CellRecord(owner, cell[4], cell[3], cell[8], index, tag)
    idx = u64(index)
    rows = [(CELLS, cell_id, record.encode()), (BY_HOLDER, owner + idx, cell_id)]
    if tag:
        rows.append((BY_SESSION, tag + idx, cell_id))
        if body.record_seq is not None:
            head = RecordHead(body.record_seq, cell_id, body.record_end)
            rows.append((RECORD_HEADS, tag, head.encode()))
    return rows


class Cells(Projection):
    """Cell records, their holder and session indexes, record heads and the erasure list."""

    DB_NAMES = (CELLS, BY_HOLDER, BY_SESSION, RECORD_HEADS, ERASURES)
    SEALED = frozenset({CELLS, RECORD_HEADS})

    __slots__ = ()

    # -- applying -------------------------------------------------------------------------

    def apply_remember(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """File the cell of a REMEMBER under its holder and its session tag; a record cell
        also moves its session's record head (the rows of :func:`remember_rows`)."""
        put = self.t.put
        for name, key, value in remember_rows(index, body):
            put(txn, name, key, value)

    def apply_forget(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """The first FORGET of a cell enters the erasure list (which matches the FORGET
        receipts in the log, saihm-protocol "Erasure"), marks the record and unlists it."""
        cell_id = leaf.subject_id
        self.t.put(txn, ERASURES, cell_id, ErasureRecord(index).encode(), overwrite=False)
        record = self.get(txn, cell_id)
        if record is None or record.erased:
            return
        self.t.put(
            txn,
            CELLS,
            cell_id,
            CellRecord(
                record.owner,
                record.tier,
                record.kek_version,
                record.timestamp,
                record.index,
                record.session_tag,
                index,
            ).encode(),
        )
        self.t.delete(txn, BY_HOLDER, record.owner + u64(record.index))
        if record.session_tag:
            self.t.delete(txn, BY_SESSION, record.session_tag + u64(record.index))

    HANDLERS: ClassVar[Mapping[Operation, Handler]] = {
        Operation.REMEMBER: apply_remember,
        Operation.FORGET: apply_forget,
    }

    # -- queries --------------------------------------------------------------------------

    def get(self, txn: Txn, cell_id: bytes) -> CellRecord | None:
        """The cell's record, or None (never remembered, or its MAC fails: it offers nothing)."""
        raw = self.t.get(txn, CELLS, cell_id)
        return None if raw is None else CellRecord.decode(raw, authentic=True)

    def live_of_holder(self, txn: Txn, holder_id: bytes) -> Iterator[tuple[int, bytes]]:
        """(REMEMBER index, cellId) of the holder's unerased cells, in log order (a hint)."""
        for key, cell_id in self.t.scan(txn, BY_HOLDER, holder_id):
            yield read_u64(key[32:]), cell_id

    def live_of_session(self, txn: Txn, session_tag: bytes) -> Iterator[tuple[int, bytes]]:
        """(REMEMBER index, cellId) of the session's unerased cells, in log order (a hint)."""
        for key, cell_id in self.t.scan(txn, BY_SESSION, session_tag):
            yield read_u64(key[32:]), cell_id

    def record_head(self, txn: Txn, session_tag: bytes) -> RecordHead | None:
        """The last record cell of the session's chain, or None if it has none."""
        raw = self.t.get(txn, RECORD_HEADS, session_tag)
        return None if raw is None else RecordHead.decode(raw, authentic=True)

    def is_erased(self, txn: Txn, cell_id: bytes) -> bool:
        """Whether the erasure list names the cell (any stored entry counts)."""
        return self.t.raw(txn, ERASURES, cell_id) is not None

    def erased_ids(self, txn: Txn) -> set[bytes]:
        """Every cellId in the erasure list."""
        return {key for key, _ in self.t.items(txn, ERASURES)}

    def erasures(self, txn: Txn) -> Iterator[tuple[bytes, ErasureRecord]]:
        """The erasure list in cellId order."""
        for key, value in self.t.items(txn, ERASURES):
            yield key, ErasureRecord.decode(value)
