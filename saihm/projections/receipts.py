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


_Row = tuple[bytes, bytes]


def index_rows(
    idx: bytes,
    receipt_id: bytes,
    subject_id: bytes,
    holder_id: bytes,
    timestamp: int,
    operation: str,
) -> tuple[_Row, _Row, _Row, _Row]:
    """The (key, value) rows of the leaf at ``idx`` (its u64 index) in :data:`RECEIPT_IDS`,
    :data:`BY_SUBJECT`, :data:`RX_BY_HOLDER` and :data:`BY_OPERATION`, shared by the live
    apply and the bulk apply (saihm/projections/bulk.py). :class:`TypeError` for a receiptId
    that is not bytes (every key must be)."""
    if type(receipt_id) is not bytes:
        raise TypeError("a receiptId is bytes")
    return (
        (receipt_id, idx),
        (subject_id + idx, b""),
        (holder_id + idx, u64(timestamp)),
        (operation_key(operation) + idx, b""),
    )


class Receipts(Projection):
    """The four receipt indexes; :meth:`apply_every` runs for every leaf."""

    DB_NAMES = (RECEIPT_IDS, BY_SUBJECT, RX_BY_HOLDER, BY_OPERATION)

    __slots__ = ()

    def apply_every(self, txn: Txn, index: int, leaf: LeafView) -> None:
        """Index leaf ``index`` by its receiptId, subject, holder (with its timestamp) and
        operation (the rows of :func:`index_rows`). Called directly by the registry."""
        db = self.t.db
        put = txn.put
        ids, subject, holder, operation = index_rows(
            u64(index),
            leaf.receipt_id,
            leaf.subject_id,
            leaf.holder_id,
            leaf.timestamp,
            leaf.operation,
        )
        put(ids[0], ids[1], db=db[RECEIPT_IDS])
        put(subject[0], subject[1], db=db[BY_SUBJECT])
        put(holder[0], holder[1], db=db[RX_BY_HOLDER])
        put(operation[0], operation[1], db=db[BY_OPERATION])

    def timestamps_of_holder(self, txn: Txn, holder_id: bytes) -> Iterator[int]:
        """The timestamps of every receipt naming the holder, in log order."""
        for _, value in self.t.scan(txn, RX_BY_HOLDER, holder_id):
            yield read_u64(value)
