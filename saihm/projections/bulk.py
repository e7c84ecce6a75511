"""The bulk apply: a run of leaves applied as rows written sorted, one batch per namespace.

``saihm rebuild`` and ``saihm verify --data`` replay the whole log (issue 24). Applying it leaf
by leaf costs a decode of the leaf into a :class:`LeafView`, a put per row in leaf order (so in
random key order for the ids) and the registry's dispatch per projection. Here each leaf is
decoded once; the rows every leaf writes (:func:`saihm.projections.receipts.index_rows`) and
those of a REMEMBER (:func:`saihm.projections.cells.remember_rows`), the bulk of any log, are
collected as pending rows of their namespace; every other operation runs its projection's own
handler against :class:`PendingRows`, which reads a key from the pending rows first and then
from the storage, and collects its writes the same way. :meth:`PendingRows.flush` then writes
each namespace's rows in key order with one ``put_many`` (appending when they all follow the
namespace's last key). The rows and their values, record MACs included, are those the live
:meth:`Projections.apply` writes, from the same code, so the result is byte-identical
(tests/projections/test_bulk.py compares them over random runs).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import cbor2

from saihm.events.operations import OPERATIONS, Operation
from saihm.events.records import Body, RecordError
from saihm.projections.cells import Cells, remember_rows
from saihm.projections.keys import LeafView
from saihm.projections.receipts import (
    BY_OPERATION,
    BY_SUBJECT,
    RECEIPT_IDS,
    RX_BY_HOLDER,
    index_rows,
)
from saihm.storage.base import Namespace, WriteTxn

if TYPE_CHECKING:
    from saihm.projections.apply import Projections

__all__ = ["LeafFailed", "PendingRows", "apply_leaves"]

_U64 = struct.Struct(">Q")

# A REMEMBER's rows are collected here directly: that holds while the cells projection is the
# only one applying it, with the handler that writes exactly :func:`remember_rows`.
if (
    OPERATIONS[Operation.REMEMBER].projections != ("cells",)
    or Cells.HANDLERS[Operation.REMEMBER] is not Cells.apply_remember
):
    raise AssertionError("the bulk apply of REMEMBER no longer matches its handlers")


class LeafFailed(Exception):
    """Leaf ``index`` cannot be applied (a damaged leaf or body); the cause is chained."""

    def __init__(self, index: int) -> None:
        super().__init__(f"leaf {index} cannot be applied")
        self.index = index


class PendingRows:
    """Writes to the projection namespaces of one write transaction, held until :meth:`flush`.

    It offers the part of the write transaction interface the projection handlers use
    (``get``, ``put``, ``delete``): a read sees the pending rows first, then the storage; a
    deleted key is pending as None. Nothing reaches the storage before :meth:`flush`.
    """

    __slots__ = ("rows", "txn")

    def __init__(self, txn: WriteTxn, names: Sequence[bytes]) -> None:
        self.txn = txn
        #: Namespace name -> key -> value (None: deleted).
        self.rows: dict[bytes, dict[bytes, bytes | None]] = {name: {} for name in names}

    def get(self, key: bytes, *, db: Namespace) -> bytes | None:
        pending = self.rows[db.name]
        if key in pending:
            return pending[key]
        return self.txn.get(key, db=db)

    def put(self, key: bytes, value: bytes, *, db: Namespace, overwrite: bool = True) -> bool:
        if not overwrite and self.get(key, db=db) is not None:
            return False
        self.rows[db.name][key] = value
        return True

    def delete(self, key: bytes, *, db: Namespace) -> bool:
        present = self.get(key, db=db) is not None
        if present:
            self.rows[db.name][key] = None
        return present

    def flush(self, namespaces: dict[bytes, Namespace]) -> None:
        """Write every pending row to the storage, each namespace's in key order."""
        txn = self.txn
        for name, pending in self.rows.items():
            if not pending:
                continue
            db = namespaces[name]
            rows = sorted(pending.items())
            if None in pending.values():
                for key, value in rows:
                    if value is None:
                        txn.delete(key, db=db)
                rows = [row for row in rows if row[1] is not None]
            if rows:
                last = txn.last(db)
                append = last is None or rows[0][0] > last[0]
                txn.put_many(rows, db=db, append=append)  # type: ignore[arg-type]
            pending.clear()


def apply_leaves(
    projections: Projections,
    txn: WriteTxn,
    first: int,
    leaves: Sequence[bytes],
    body_of: Callable[[str, bytes], Body | None],
    *,
    count: int | None = None,
) -> None:
    """Apply ``leaves`` (the stored leaves ``first``, ``first + 1``, ...) to ``projections``
    in ``txn``, as :meth:`Projections.apply` would one by one, then record ``count`` leaves
    as applied (when given) and write the rows.

    ``body_of(operation, subjectId)`` is the event's private body (or None). Raises
    :class:`LeafFailed` for a leaf that cannot be applied, with the cause chained; the
    caller aborts the transaction.
    """
    pending = PendingRows(txn, projections.DB_NAMES)
    rows = pending.rows
    ids, subjects = rows[RECEIPT_IDS], rows[BY_SUBJECT]
    holders, operations = rows[RX_BY_HOLDER], rows[BY_OPERATION]
    handlers = projections._handlers
    seal, sealed = projections.seal.seal, projections.SEALED
    pack, loads = _U64.pack, cbor2.loads
    remember = str(Operation.REMEMBER)
    index = first
    try:
        for leaf in leaves:
            m = loads(leaf)
            receipt_id, subject_id, operation, holder_id, timestamp = m[1], m[2], m[3], m[4], m[6]
            a, b, c, d = index_rows(
                pack(index), receipt_id, subject_id, holder_id, timestamp, operation
            )
            ids[a[0]] = a[1]
            subjects[b[0]] = b[1]
            holders[c[0]] = c[1]
            operations[d[0]] = d[1]
            if operation == remember:
                for name, key, value in remember_rows(index, body_of(operation, subject_id)):
                    rows[name][key] = seal(name, key, value) if name in sealed else value
            elif operation in handlers:
                view = LeafView(receipt_id, subject_id, operation, holder_id, timestamp, m.get(7))
                body = body_of(operation, subject_id)
                for handler in handlers[operation]:
                    handler(pending, index, view, body)
            index += 1
    except (
        RecordError,
        struct.error,
        ValueError,
        KeyError,
        TypeError,
        IndexError,
        AttributeError,
    ) as err:
        raise LeafFailed(index) from err
    if count is not None:
        projections.mark_applied(pending, count)
    pending.flush(projections.db)
