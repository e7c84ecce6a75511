"""The one apply function for every projection, and the rebuild comparison.

Every projection value is deterministic CBOR with small integer keys; every index key is a
fixed-width concatenation of 32-byte ids and big-endian u64 leaf indexes, so LMDB's byte order
is log order within one id. saihm-protocol sections are cited where a rule comes from.
"""

from __future__ import annotations

from collections.abc import Iterator

import lmdb

from saihm.projections.keys import Body, LeafView, dumps, loads, read_u64, u64

# Named databases, in a fixed order (the owner of the environment sizes max_dbs from these).
CELLS = b"p_cells"  # cellId -> {1 owner, 2 tier, 3 kekVersion, 4 ts, 5 index, 6 tag, 7 erasedAt}
BY_HOLDER = b"p_cells_by_holder"  # holderId || index -> cellId (live cells only)
BY_SESSION = b"p_cells_by_session"  # tag || index -> cellId (live cells only)
RECORD_HEADS = b"p_record_heads"  # tag -> {1 seq, 2 cellId, 3 ended}
CONTRACTS = b"p_contracts"  # contractId -> {1 holder, 2 grantees, 3 shards, 4 mode, ...}
BY_GRANTEE = b"p_contracts_by_grantee"  # granteeId || contractId -> b""
BY_OWNER = b"p_contracts_by_holder"  # holderId || contractId -> b""
ERASURES = b"p_erasures"  # cellId -> index of the FORGET receipt
HOLDERS = b"p_holders"  # holderId -> {1 publicKey, 2 index, 3 ts}
PROPOSALS = b"p_proposals"  # proposalId -> {1 scope, 2 paramKey, 3 value, 4 snapshot, ...}
VOTES = b"p_votes"  # proposalId || holderId -> {1 approve, 2 weight, 3 ts, 4 index}
TALLIES = b"p_tallies"  # proposalId -> {1 for, 2 against, 3 abstain}
GRANTS = b"p_grants"  # grantId -> {1 holder, 2 namespaces, 3 expiresAt, 4 index, 5 revoked}
RECEIPT_IDS = b"p_receipt_ids"  # receiptId -> index
BY_SUBJECT = b"p_rx_by_subject"  # subjectId || index -> b""
RX_BY_HOLDER = b"p_rx_by_holder"  # holderId || index -> timestamp u64
BY_OPERATION = b"p_rx_by_operation"  # operation || 0x00 || index -> b""
META = b"p_meta"  # b"applied" -> number of leaves applied

Txn = lmdb.Transaction

DB_NAMES: tuple[bytes, ...] = (
    CELLS, BY_HOLDER, BY_SESSION, RECORD_HEADS, CONTRACTS, BY_GRANTEE, BY_OWNER, ERASURES,
    HOLDERS, PROPOSALS, VOTES, TALLIES, GRANTS, RECEIPT_IDS, BY_SUBJECT, RX_BY_HOLDER,
    BY_OPERATION, META,
)  # fmt: skip

APPLIED = b"applied"


class Projections:
    """The projection databases of one environment, and the code that derives them."""

    DB_NAMES = DB_NAMES

    def __init__(self, env: lmdb.Environment) -> None:
        self.env = env
        self.db = {name: env.open_db(name) for name in DB_NAMES}

    # -- applying -------------------------------------------------------------------------

    def applied(self, txn: lmdb.Transaction) -> int:
        """How many leaves the projections reflect."""
        raw = txn.get(APPLIED, db=self.db[META])
        return 0 if raw is None else read_u64(raw)

    def apply(
        self,
        txn: lmdb.Transaction,
        index: int,
        leaf: LeafView,
        body: Body | None,
        *,
        record_applied: bool = True,
    ) -> None:
        """Apply leaf ``index`` (and its private body, if the event has one) to every projection.

        Preconditions: ``index == self.applied(txn)``; the caller holds a write transaction.
        ``record_applied=False`` lets a caller applying a run of leaves in one transaction write
        the applied count once, with :meth:`mark_applied`, after the last of them.
        """
        db = self.db
        op = leaf.operation
        idx = u64(index)
        put = txn.put
        put(leaf.receipt_id, idx, db=db[RECEIPT_IDS])
        put(leaf.subject_id + idx, b"", db=db[BY_SUBJECT])
        put(leaf.holder_id + idx, u64(leaf.timestamp), db=db[RX_BY_HOLDER])
        put((_OPERATION_KEYS.get(op) or op.encode() + b"\x00") + idx, b"", db=db[BY_OPERATION])
        handler = _HANDLERS.get(op)
        if handler is not None:
            handler(self, txn, index, leaf, body)
        if record_applied:
            self.mark_applied(txn, index + 1)

    def mark_applied(self, txn: lmdb.Transaction, count: int) -> None:
        """Record that the first ``count`` leaves are reflected (same transaction as the state)."""
        txn.put(APPLIED, u64(count), db=self.db[META])

    def _key(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        if txn.get(leaf.holder_id, db=self.db[HOLDERS]) is None:
            record = {1: leaf.detail, 2: index, 3: leaf.timestamp}
            txn.put(leaf.holder_id, dumps(record), db=self.db[HOLDERS])

    def _remember(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        if body is None:
            raise ValueError(f"REMEMBER at leaf {index} has no stored cell")
        cell = loads(body.object_cbor)
        cell_id, owner = cell[1], cell[2]
        tag = body.session_tag or b""
        record = {1: owner, 2: cell[4], 3: cell[3], 4: cell[8], 5: index, 6: tag}
        txn.put(cell_id, dumps(record), db=self.db[CELLS])
        txn.put(owner + u64(index), cell_id, db=self.db[BY_HOLDER])
        if tag:
            txn.put(tag + u64(index), cell_id, db=self.db[BY_SESSION])
            if body.record_seq is not None:
                head = {1: body.record_seq, 2: cell_id, 3: body.record_end}
                txn.put(tag, dumps(head), db=self.db[RECORD_HEADS])

    def _forget(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        cell_id = leaf.subject_id
        # The erasure list matches the FORGET receipts in the log (saihm-protocol "Erasure").
        txn.put(cell_id, u64(index), db=self.db[ERASURES], overwrite=False)
        raw = txn.get(cell_id, db=self.db[CELLS])
        if raw is None:
            return
        record = loads(raw)
        if 7 in record:
            return
        record[7] = index
        txn.put(cell_id, dumps(record), db=self.db[CELLS])
        txn.delete(record[1] + u64(record[5]), db=self.db[BY_HOLDER])
        if record[6]:
            txn.delete(record[6] + u64(record[5]), db=self.db[BY_SESSION])

    def _share(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        if body is None:
            raise ValueError(f"SHARE at leaf {index} has no stored contract")
        c = loads(body.object_cbor)
        contract_id = c[1]
        if txn.get(contract_id, db=self.db[CONTRACTS]) is not None:
            return
        record = {1: c[2], 2: c[3], 3: c[4], 4: c[5], 5: c[6], 6: c[7], 7: c[8], 8: index,
                  9: False, 10: []}  # fmt: skip
        txn.put(contract_id, dumps(record), db=self.db[CONTRACTS])
        txn.put(c[2] + contract_id, b"", db=self.db[BY_OWNER])
        for grantee in c[3]:
            txn.put(grantee + contract_id, b"", db=self.db[BY_GRANTEE])

    def _contract_update(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        raw = txn.get(leaf.subject_id, db=self.db[CONTRACTS])
        if raw is None:
            return
        record = loads(raw)
        accepted = set(record[10])
        if leaf.operation == "REVOKE" and leaf.holder_id == record[1]:
            record[9] = True
        elif leaf.operation == "ACCEPT" and leaf.holder_id in record[2]:
            accepted.add(leaf.holder_id)
        elif leaf.operation == "DECLINE":
            accepted.discard(leaf.holder_id)
        record[10] = sorted(accepted)
        txn.put(leaf.subject_id, dumps(record), db=self.db[CONTRACTS])

    def _propose(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        # "Where two PROPOSE receipts carry the same proposalId, the first in log order governs."
        d = leaf.detail
        record = {1: d["scope"], 2: d["paramKey"], 3: d["proposedValue"], 4: d["snapshotEpoch"],
                  5: leaf.holder_id, 6: index, 7: leaf.timestamp}  # fmt: skip
        txn.put(leaf.subject_id, dumps(record), db=self.db[PROPOSALS], overwrite=False)

    def _vote(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        # Tallies count, per holder and proposal, only the first VOTE receipt in log order.
        if txn.get(leaf.subject_id, db=self.db[PROPOSALS]) is None:
            return
        d = leaf.detail
        vote = {1: d["approve"], 2: d["weight"], 3: leaf.timestamp, 4: index}
        key = leaf.subject_id + leaf.holder_id
        if not txn.put(key, dumps(vote), db=self.db[VOTES], overwrite=False):
            return
        raw = txn.get(leaf.subject_id, db=self.db[TALLIES])
        tally = {1: 0, 2: 0, 3: 0} if raw is None else loads(raw)
        tally[1 if d["approve"] else 2] += d["weight"]
        txn.put(leaf.subject_id, dumps(tally), db=self.db[TALLIES])

    def _grant(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        d = leaf.detail
        record = {1: leaf.holder_id, 2: d.get("namespaces"), 3: d["expiresAt"], 4: index,
                  5: False}  # fmt: skip
        txn.put(leaf.subject_id, dumps(record), db=self.db[GRANTS], overwrite=False)

    def _ungrant(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        raw = txn.get(leaf.subject_id, db=self.db[GRANTS])
        if raw is None:
            return
        record = loads(raw)
        if record[1] == leaf.holder_id:
            record[5] = True
            txn.put(leaf.subject_id, dumps(record), db=self.db[GRANTS])

    # -- comparing ------------------------------------------------------------------------

    def items(self, txn: lmdb.Transaction, name: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of one projection database, in key order."""
        with txn.cursor(db=self.db[name]) as cursor:
            yield from cursor.iternext(keys=True, values=True)


_HANDLERS = {
    "KEY": Projections._key,
    "REMEMBER": Projections._remember,
    "FORGET": Projections._forget,
    "SHARE": Projections._share,
    "REVOKE": Projections._contract_update,
    "ACCEPT": Projections._contract_update,
    "DECLINE": Projections._contract_update,
    "PROPOSE": Projections._propose,
    "VOTE": Projections._vote,
    "GRANT": Projections._grant,
    "UNGRANT": Projections._ungrant,
}
_OPERATION_KEYS = {op: op.encode() + b"\x00" for op in (*_HANDLERS, "RECALL", "STATUS")}


def first_difference(
    live: Projections, live_txn: lmdb.Transaction, fresh: Projections, fresh_txn: lmdb.Transaction
) -> str | None:
    """Compare every projection database bytewise; describe the first difference, or None."""
    for name in DB_NAMES:
        a = live.items(live_txn, name)
        b = fresh.items(fresh_txn, name)
        position = 0
        while True:
            x = next(a, None)
            y = next(b, None)
            if x is None and y is None:
                break
            if x != y:
                key = (x or y)[0].hex()
                return f"{name.decode()}: entry {position} differs (key {key[:80]})"
            position += 1
    return None
