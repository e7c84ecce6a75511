"""Sharing contracts, their acceptances, and the indexes by grantee and by holder
(saihm-protocol "Sharing contracts"; ACCEPT / DECLINE are the grantee's extension operations).

All three databases are MAC-bound: a forged contract or index entry shares nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from saihm.events.operations import Operation
from saihm.events.records import Body, ContractRecord
from saihm.projections.keys import LeafView, loads
from saihm.projections.tables import Handler, Projection, Txn

CONTRACTS = b"p_contracts"  # contractId -> ContractRecord
BY_GRANTEE = b"p_contracts_by_grantee"  # granteeId || contractId -> b""
BY_OWNER = b"p_contracts_by_holder"  # holderId || contractId -> b""


class Contracts(Projection):
    """Contract records (with who accepted), by grantee and by sharing holder."""

    DB_NAMES = (CONTRACTS, BY_GRANTEE, BY_OWNER)
    SEALED = frozenset(DB_NAMES)

    __slots__ = ()

    # -- applying -------------------------------------------------------------------------

    def apply_share(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """The first SHARE of a contract files it, unaccepted, under its holder and grantees."""
        if body is None:
            raise ValueError(f"SHARE at leaf {index} has no stored contract")
        c = loads(body.object_cbor)
        assert isinstance(c, dict)
        contract_id = c[1]
        if self.t.raw(txn, CONTRACTS, contract_id) is not None:
            return
        record = ContractRecord(
            holder=c[2],
            grantees=tuple(c[3]),
            shards=tuple(c[4]),
            mode=c[5],
            scope=c[6],
            expires_at=c[7],
            timestamp=c[8],
            index=index,
            revoked=False,
            accepted=(),
        )
        self.t.put(txn, CONTRACTS, contract_id, record.encode())
        self.t.put(txn, BY_OWNER, record.holder + contract_id, b"")
        for grantee in record.grantees:
            self.t.put(txn, BY_GRANTEE, grantee + contract_id, b"")

    def apply_revoke(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """REVOKE by the contract's holder revokes it."""
        record = self.get(txn, leaf.subject_id)
        if record is not None:
            revoked = record.revoked or leaf.holder_id == record.holder
            self._update(txn, leaf.subject_id, record, revoked, set(record.accepted))

    def apply_accept(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """ACCEPT by a named grantee adds it to the acceptances."""
        record = self.get(txn, leaf.subject_id)
        if record is not None:
            accepted = set(record.accepted)
            if leaf.holder_id in record.grantees:
                accepted.add(leaf.holder_id)
            self._update(txn, leaf.subject_id, record, record.revoked, accepted)

    def apply_decline(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """DECLINE removes its signer from the acceptances (declining after accepting
        withdraws the acceptance)."""
        record = self.get(txn, leaf.subject_id)
        if record is not None:
            accepted = set(record.accepted)
            accepted.discard(leaf.holder_id)
            self._update(txn, leaf.subject_id, record, record.revoked, accepted)

    def _update(
        self,
        txn: Txn,
        contract_id: bytes,
        record: ContractRecord,
        revoked: bool,
        accepted: set[bytes],
    ) -> None:
        updated = ContractRecord(
            record.holder,
            record.grantees,
            record.shards,
            record.mode,
            record.scope,
            record.expires_at,
            record.timestamp,
            record.index,
            revoked,
            tuple(sorted(accepted)),
        )
        self.t.put(txn, CONTRACTS, contract_id, updated.encode())

    HANDLERS: ClassVar[Mapping[Operation, Handler]] = {
        Operation.SHARE: apply_share,
        Operation.REVOKE: apply_revoke,
        Operation.ACCEPT: apply_accept,
        Operation.DECLINE: apply_decline,
    }

    # -- queries --------------------------------------------------------------------------

    def get(self, txn: Txn, contract_id: bytes) -> ContractRecord | None:
        """The contract's record, or None (unknown, or its MAC fails: it shares nothing)."""
        raw = self.t.get(txn, CONTRACTS, contract_id)
        return None if raw is None else ContractRecord.decode(raw, authentic=True)

    def _listed(
        self, txn: Txn, index: bytes, holder_id: bytes
    ) -> Iterator[tuple[bytes, ContractRecord]]:
        for key, _ in self.t.scan(txn, index, holder_id):
            contract_id = key[32:]
            record = self.get(txn, contract_id)
            if record is not None:
                yield contract_id, record

    def of_holder(self, txn: Txn, holder_id: bytes) -> Iterator[tuple[bytes, ContractRecord]]:
        """(contractId, record) of every contract the holder made, in contractId order."""
        return self._listed(txn, BY_OWNER, holder_id)

    def of_grantee(self, txn: Txn, grantee: bytes) -> Iterator[tuple[bytes, ContractRecord]]:
        """(contractId, record) of every contract naming ``grantee``, in contractId order."""
        return self._listed(txn, BY_GRANTEE, grantee)

    def active_for(self, txn: Txn, grantee: bytes, now: int) -> list[ContractRecord]:
        """Contract records active for ``grantee`` at ``now``: accepted by it, not revoked,
        not expired (:meth:`ContractRecord.active_for`).

        Both the grantee index entry and the contract record must carry a valid MAC, and the
        contract must name ``grantee`` among its grantees and its acceptances.
        """
        return [r for _, r in self.of_grantee(txn, grantee) if r.active_for(grantee, now)]
