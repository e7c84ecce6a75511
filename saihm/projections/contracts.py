"""Sharing contracts, their acceptances, and the indexes by grantee and by holder
(saihm-protocol "Sharing contracts"; ACCEPT / DECLINE are the grantee's extension operations).

All three databases are MAC-bound: a forged contract or index entry shares nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from saihm.events.records import Body, ContractRecord
from saihm.projections.keys import LeafView, loads
from saihm.projections.tables import Projection, Txn

CONTRACTS = b"p_contracts"  # contractId -> ContractRecord
BY_GRANTEE = b"p_contracts_by_grantee"  # granteeId || contractId -> b""
BY_OWNER = b"p_contracts_by_holder"  # holderId || contractId -> b""


class Contracts(Projection):
    """Contract records (with who accepted), by grantee and by sharing holder."""

    DB_NAMES = (CONTRACTS, BY_GRANTEE, BY_OWNER)
    SEALED = frozenset(DB_NAMES)
    HANDLERS: ClassVar[dict[str, str]] = {
        "SHARE": "apply_share",
        "REVOKE": "apply_update",
        "ACCEPT": "apply_update",
        "DECLINE": "apply_update",
    }

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

    def apply_update(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """REVOKE by the contract's holder revokes it; ACCEPT by a named grantee adds it to
        the acceptances; DECLINE removes its signer from them (declining after accepting
        withdraws the acceptance)."""
        record = self.get(txn, leaf.subject_id)
        if record is None:
            return
        accepted = set(record.accepted)
        revoked = record.revoked
        if leaf.operation == "REVOKE" and leaf.holder_id == record.holder:
            revoked = True
        elif leaf.operation == "ACCEPT" and leaf.holder_id in record.grantees:
            accepted.add(leaf.holder_id)
        elif leaf.operation == "DECLINE":
            accepted.discard(leaf.holder_id)
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
        self.t.put(txn, CONTRACTS, leaf.subject_id, updated.encode())

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
