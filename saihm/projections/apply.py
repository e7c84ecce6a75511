"""The one apply function for every projection, and the rebuild comparison.

Every projection value is deterministic CBOR with small integer keys; every index key is a
fixed-width concatenation of 32-byte ids and big-endian u64 leaf indexes, so the storage's byte
order is log order within one id. saihm-protocol sections are cited where a rule comes from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from saihm.projections.keys import Body, LeafView, dumps, loads, read_u64, u64
from saihm.projections.seal import RecordSeal
from saihm.storage.base import ReadTxn, Storage, WriteTxn

# Namespaces, in a fixed order (the owner of the storage opens it with these).
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
REVOKED = b"p_session_revocations"  # revocation subject -> {1 holder, 2 index} (UNGRANT)
META = b"p_meta"  # b"applied" -> number of leaves applied; b"format" -> projection format

Txn = ReadTxn

DB_NAMES: tuple[bytes, ...] = (
    CELLS, BY_HOLDER, BY_SESSION, RECORD_HEADS, CONTRACTS, BY_GRANTEE, BY_OWNER, ERASURES,
    HOLDERS, PROPOSALS, VOTES, TALLIES, GRANTS, RECEIPT_IDS, BY_SUBJECT, RX_BY_HOLDER,
    BY_OPERATION, REVOKED, META,
)  # fmt: skip

# The databases whose records grant access: each value is stored as value || MAC
# (saihm/projections/seal.py). Not sealed: the public receipt indexes, tallies, the erasure
# list, and the cell indexes by holder and by session, which are untrusted candidate hints
# (DESIGN.md "Data at rest"): the read path decides on the verified, decrypted label and the
# status counts check each hint against its sealed cell record.
SEALED: frozenset[bytes] = frozenset(
    {CELLS, RECORD_HEADS, CONTRACTS, BY_GRANTEE, BY_OWNER, HOLDERS, GRANTS, REVOKED}
)

APPLIED = b"applied"
FORMAT = b"format"
# 2: access records carry record MACs. A store whose projections are of another format refuses
# to open until ``saihm rebuild --replace`` rewrites them.
PROJECTION_FORMAT = 2


def revocation_subject(holder_id: bytes, token_or_session_id: bytes) -> bytes:
    """The subjectId of the UNGRANT that revokes every token of ``holder_id`` carrying this
    tokenId (16 bytes) or sessionId (32 bytes): SHA-256 of a label, the holderId and the id, so
    the public log does not show the id (docs/formats.md "Session revocation")."""
    label = b"saihm session revocation v1\x00"
    return hashlib.sha256(label + holder_id + token_or_session_id).digest()


class Projections:
    """The projection namespaces of one storage, and the code that derives them."""

    DB_NAMES = DB_NAMES
    SEALED = SEALED

    def __init__(self, storage: Storage, seal: RecordSeal) -> None:
        self.storage = storage
        self.seal = seal
        self.db = {name: storage.namespace(name) for name in DB_NAMES}

    # -- MAC-bound records (saihm/projections/seal.py) ------------------------------------

    def put(self, txn: WriteTxn, name: bytes, key: bytes, value: bytes, **kw: bool) -> bool:
        """Store ``value`` under ``key`` in projection ``name``, with its MAC if ``name`` is
        one of :data:`SEALED`."""
        if name in SEALED:
            value = self.seal.seal(name, key, value)
        return txn.put(key, value, db=self.db[name], **kw)

    def get(self, txn: Txn, name: bytes, key: bytes) -> bytes | None:
        """The value under ``key`` in ``name``; for :data:`SEALED` databases None (and a
        warning) when its MAC is missing or wrong, so a forged or edited record grants
        nothing."""
        raw = txn.get(key, db=self.db[name])
        if name in SEALED:
            return self.seal.open(name, key, raw)
        return None if raw is None else bytes(raw)

    def record(self, txn: Txn, name: bytes, key: bytes) -> object | None:
        """:meth:`get`, decoded from CBOR (for the CBOR-valued databases)."""
        value = self.get(txn, name, key)
        return None if value is None else loads(value)

    def scan(self, txn: Txn, name: bytes, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Keys and values of ``name`` whose key starts with ``prefix``, in key order; records
        of a :data:`SEALED` database whose MAC fails are skipped (and logged)."""
        sealed = name in SEALED
        for key, raw in txn.scan(self.db[name], prefix=prefix):
            value = self.seal.open(name, key, raw) if sealed else bytes(raw)
            if value is not None:
                yield key, value

    def format(self, txn: Txn) -> int | None:
        """The stored projection format, or None for a store written before formats."""
        raw = txn.get(FORMAT, db=self.db[META])
        return None if raw is None else read_u64(raw)

    # -- applying -------------------------------------------------------------------------

    def applied(self, txn: ReadTxn) -> int:
        """How many leaves the projections reflect."""
        raw = txn.get(APPLIED, db=self.db[META])
        return 0 if raw is None else read_u64(raw)

    def apply(
        self,
        txn: WriteTxn,
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

    def mark_applied(self, txn: WriteTxn, count: int) -> None:
        """Record that the first ``count`` leaves are reflected (same transaction as the state)."""
        txn.put(APPLIED, u64(count), db=self.db[META])
        txn.put(FORMAT, u64(PROJECTION_FORMAT), db=self.db[META])

    def _key(self, txn: WriteTxn, index: int, leaf: LeafView, body: Body | None) -> None:
        if txn.get(leaf.holder_id, db=self.db[HOLDERS]) is None:
            record = {1: leaf.detail, 2: index, 3: leaf.timestamp}
            self.put(txn, HOLDERS, leaf.holder_id, dumps(record))

    def _remember(self, txn: WriteTxn, index: int, leaf: LeafView, body: Body | None) -> None:
        if body is None:
            raise ValueError(f"REMEMBER at leaf {index} has no stored cell")
        cell = loads(body.object_cbor)
        cell_id, owner = cell[1], cell[2]
        tag = body.session_tag or b""
        record = {1: owner, 2: cell[4], 3: cell[3], 4: cell[8], 5: index, 6: tag}
        self.put(txn, CELLS, cell_id, dumps(record))
        self.put(txn, BY_HOLDER, owner + u64(index), cell_id)
        if tag:
            self.put(txn, BY_SESSION, tag + u64(index), cell_id)
            if body.record_seq is not None:
                head = {1: body.record_seq, 2: cell_id, 3: body.record_end}
                self.put(txn, RECORD_HEADS, tag, dumps(head))

    def _forget(self, txn: WriteTxn, index: int, leaf: LeafView, body: Body | None) -> None:
        cell_id = leaf.subject_id
        # The erasure list matches the FORGET receipts in the log (saihm-protocol "Erasure").
        txn.put(cell_id, u64(index), db=self.db[ERASURES], overwrite=False)
        record = self.record(txn, CELLS, cell_id)
        if record is None:
            return
        if 7 in record:
            return
        record[7] = index
        self.put(txn, CELLS, cell_id, dumps(record))
        txn.delete(record[1] + u64(record[5]), db=self.db[BY_HOLDER])
        if record[6]:
            txn.delete(record[6] + u64(record[5]), db=self.db[BY_SESSION])

    def _share(self, txn: WriteTxn, index: int, leaf: LeafView, body: Body | None) -> None:
        if body is None:
            raise ValueError(f"SHARE at leaf {index} has no stored contract")
        c = loads(body.object_cbor)
        contract_id = c[1]
        if txn.get(contract_id, db=self.db[CONTRACTS]) is not None:
            return
        record = {1: c[2], 2: c[3], 3: c[4], 4: c[5], 5: c[6], 6: c[7], 7: c[8], 8: index,
                  9: False, 10: []}  # fmt: skip
        self.put(txn, CONTRACTS, contract_id, dumps(record))
        self.put(txn, BY_OWNER, c[2] + contract_id, b"")
        for grantee in c[3]:
            self.put(txn, BY_GRANTEE, grantee + contract_id, b"")

    def _contract_update(
        self, txn: WriteTxn, index: int, leaf: LeafView, body: Body | None
    ) -> None:
        record = self.record(txn, CONTRACTS, leaf.subject_id)
        if record is None:
            return
        accepted = set(record[10])
        if leaf.operation == "REVOKE" and leaf.holder_id == record[1]:
            record[9] = True
        elif leaf.operation == "ACCEPT" and leaf.holder_id in record[2]:
            accepted.add(leaf.holder_id)
        elif leaf.operation == "DECLINE":
            accepted.discard(leaf.holder_id)
        record[10] = sorted(accepted)
        self.put(txn, CONTRACTS, leaf.subject_id, dumps(record))

    def _propose(self, txn: WriteTxn, index: int, leaf: LeafView, body: Body | None) -> None:
        # "Where two PROPOSE receipts carry the same proposalId, the first in log order governs."
        d = leaf.detail
        record = {1: d["scope"], 2: d["paramKey"], 3: d["proposedValue"], 4: d["snapshotEpoch"],
                  5: leaf.holder_id, 6: index, 7: leaf.timestamp}  # fmt: skip
        txn.put(leaf.subject_id, dumps(record), db=self.db[PROPOSALS], overwrite=False)

    def _vote(self, txn: WriteTxn, index: int, leaf: LeafView, body: Body | None) -> None:
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

    def _grant(self, txn: WriteTxn, index: int, leaf: LeafView, body: Body | None) -> None:
        d = leaf.detail
        record = {1: leaf.holder_id, 2: d.get("namespaces"), 3: d["expiresAt"], 4: index,
                  5: False}  # fmt: skip
        self.put(txn, GRANTS, leaf.subject_id, dumps(record), overwrite=False)

    def _ungrant(self, txn: WriteTxn, index: int, leaf: LeafView, body: Body | None) -> None:
        # UNGRANT withdraws a grant, or, when its subject names no grant, revokes the session
        # tokens its subject stands for (docs/formats.md "Session revocation").
        if txn.get(leaf.subject_id, db=self.db[GRANTS]) is None:
            if txn.get(leaf.subject_id, db=self.db[REVOKED]) is None:
                record = {1: leaf.holder_id, 2: index}
                self.put(txn, REVOKED, leaf.subject_id, dumps(record))
            return
        record = self.record(txn, GRANTS, leaf.subject_id)
        if record is not None and record[1] == leaf.holder_id:
            record[5] = True
            self.put(txn, GRANTS, leaf.subject_id, dumps(record))

    # -- comparing ------------------------------------------------------------------------

    def items(self, txn: ReadTxn, name: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of one projection database, in key order."""
        yield from txn.scan(self.db[name])


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
    live: Projections, live_txn: ReadTxn, fresh: Projections, fresh_txn: ReadTxn
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
