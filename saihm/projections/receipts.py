"""The public receipt indexes: by receiptId, subject, holder and operation (DESIGN.md "HTTP",
``GET /log/v1/receipts``). Every leaf enters all four, whatever its operation."""

from __future__ import annotations

from collections.abc import Iterator

from saihm.events.operations import OPERATIONS
from saihm.events.records import read_u64, u64
from saihm.projections.keys import LeafView
from saihm.projections.tables import Projection, Txn

RECEIPT_IDS = b"p_receipt_ids"  # receiptId -> u64 index
BY_SUBJECT = b"p_rx_by_subject"  # subjectId || u64 index -> b""
RX_BY_HOLDER = b"p_rx_by_holder"  # holderId || u64 index -> u64 timestamp
BY_OPERATION = b"p_rx_by_operation"  # operation || 0x00 || u64 index -> b""


#: The key prefix of each operation in ``p_rx_by_operation`` (its name and a 0x00), from the
#: operation registry (saihm/events/operations.py).
OPERATION_KEYS = {str(op): spec.projection_key for op, spec in OPERATIONS.items()}


def operation_key(operation: str) -> bytes:
    """The key prefix of ``operation`` in ``p_rx_by_operation``: its name and a 0x00."""
    return OPERATION_KEYS.get(operation) or operation.encode() + b"\x00"


class Receipts(Projection):
    """The four receipt indexes; :meth:`apply_every` runs for every leaf."""

    DB_NAMES = (RECEIPT_IDS, BY_SUBJECT, RX_BY_HOLDER, BY_OPERATION)

    __slots__ = ()

    def apply_every(self, txn: Txn, index: int, leaf: LeafView) -> None:
        """Index leaf ``index`` by its receiptId, subject, holder (with its timestamp) and
        operation. Called directly by the registry (hot path of a rebuild)."""
        db = self.t.db
        idx = u64(index)
        put = txn.put
        put(leaf.receipt_id, idx, db=db[RECEIPT_IDS])
        put(leaf.subject_id + idx, b"", db=db[BY_SUBJECT])
        put(leaf.holder_id + idx, u64(leaf.timestamp), db=db[RX_BY_HOLDER])
        put(operation_key(leaf.operation) + idx, b"", db=db[BY_OPERATION])

    def timestamps_of_holder(self, txn: Txn, holder_id: bytes) -> Iterator[int]:
        """The timestamps of every receipt naming the holder, in log order."""
        for _, value in self.t.scan(txn, RX_BY_HOLDER, holder_id):
            yield read_u64(value)
