"""Sharing contracts (saihm-protocol "Sharing contracts"): share, revoke, accept, decline."""

from __future__ import annotations

from typing import Any

from saihm import params as P
from saihm.errors import Conflict, MalformedInput, NotFound, NotPermitted
from saihm.events import Operation
from saihm.events.rules import check_contract_terms
from saihm.events.signing import sign_contract, sign_receipt
from saihm.projections import Body, ContractRecord
from saihm.store import Access, Change
from saihm.toolbase import ToolBase

MODES = {"temporary": "TEMPORARY", "permanent": "PERMANENT", "syndicate": "SYNDICATE"}


class SharingTools(ToolBase):
    """saihm_share, saihm_revoke_share and the grantee's accept and decline."""

    def _share(self, access: Access, params: object) -> dict:
        names = {"granteeIdHashesHex", "shardIds", "type", "scope", "expiryEpoch"}
        p = P.check_params(params, names, names - {"expiryEpoch"})
        # Each member's defect answers the protocol's code for that member (saihm_share
        # "Errors"), so a client never meets an extension code it cannot interpret.
        grantees = [
            P.id32(g[2:] if g[:2] in ("0x", "0X") else g, code="invalid_grantee", what="grantee")
            for g in P.string_list(p, "granteeIdHashesHex", code="invalid_grantee")
        ]
        shards = [
            P.id32(s, code="shard_not_found", what="shard")
            for s in P.string_list(p, "shardIds", code="shard_not_found")
        ]
        kind = P.text(p, "type", code="invalid_mode")
        mode = MODES.get(kind) if isinstance(kind, str) else None
        if mode is None:
            raise MalformedInput(
                "type must be temporary, permanent or syndicate", code="invalid_mode"
            )
        scope = P.text(p, "scope", code="invalid_scope")
        expiry = P.epoch(p.get("expiryEpoch"), "expiryEpoch")
        return self.share(access, grantees, shards, mode, scope, expiry)

    def share(
        self, access: Access, grantees: list[bytes], shards: list[bytes], mode: str, scope: str,
        expiry: int | None,
    ) -> dict:  # fmt: skip
        """Sign and store a sharing contract over the caller's own cells; log SHARE."""
        now = self._now()
        if expiry is None:
            expiry = now + self.config.temporary_default_ttl if mode == "TEMPORARY" else 0
        if access.holder_id in grantees:
            raise MalformedInput("a holder cannot grant to itself", code="invalid_grantee")
        check_contract_terms(
            grantee_ids=grantees, shard_ids=shards, mode=mode, scope=scope, expires_at=expiry,
            timestamp=now,
        )  # fmt: skip
        with self.store.read_txn() as txn:
            for shard in shards:
                record = self.store.projections.cells.get(txn, shard)
                if record is None or record.erased:
                    raise NotFound("no such cell", code="shard_not_found")
                if record.owner != access.holder_id:
                    raise NotPermitted("the caller does not hold this cell", code="not_holder")
        visible = self.store.read(access, cell_ids=shards, include_shared=False)
        if len(visible) != len(set(shards)):
            raise NotPermitted("a cell is outside this token's scope", code="not_holder")
        key = self._key(access)
        contract = sign_contract(
            key, grantee_ids=grantees, shard_ids=shards, mode=mode, scope=scope,
            expires_at=expiry, timestamp=now,
        )  # fmt: skip
        receipt = sign_receipt(
            key, subject_id=contract.contract_id, operation=Operation.SHARE, timestamp=now
        )

        def guard(txn: Any) -> None:
            for shard in shards:
                if self.store.projections.cells.is_erased(txn, shard):
                    raise NotFound("a cell was erased", code="shard_not_found")

        self._commit(
            Change(
                receipts=[receipt], bodies={contract.contract_id: Body(contract.to_cbor())},
                guard=guard,
            )
        )  # fmt: skip
        return {
            "contractId": P.hx(contract.contract_id),
            "type": mode.lower(),
            "granteeCount": len(grantees),
            "epoch": P.dec(now),
            "expiresAt": P.dec(expiry),
            "receiptId": P.hx(receipt.receipt_id),
        }

    def _revoke_share(self, access: Access, params: object) -> dict:
        p = P.check_params(params, {"contractId"}, {"contractId"})
        return self.revoke_share(
            access, P.id32(p.get("contractId"), code="contract_not_found", what="contractId")
        )

    def revoke_share(self, access: Access, contract_id: bytes) -> dict:
        """End a contract for every grantee; a repeat answers revoked = true with no receipt."""
        with self.store.read_txn() as txn:
            record = self.store.projections.contracts.get(txn, contract_id)
        if record is None:
            raise NotFound("no such contract", code="contract_not_found")
        if record.holder != access.holder_id or not self.contract_in_scope(access, record):
            raise NotPermitted("the caller does not hold this contract", code="not_holder")
        if record.revoked:
            return {"revoked": True, "epoch": P.dec(self._now())}
        receipt = sign_receipt(
            self._key(access), subject_id=contract_id, operation=Operation.REVOKE,
            timestamp=self._now(),
        )  # fmt: skip

        def guard(txn: Any) -> object:
            now_record = self.store.projections.contracts.get(txn, contract_id)
            if now_record is None:
                raise NotFound("no such contract", code="contract_not_found")
            if now_record.revoked:
                return {"revoked": True, "epoch": P.dec(self._now())}
            return None

        change = self._commit(Change(receipts=[receipt], guard=guard))
        if change.outcome is not None:
            return change.outcome
        return {
            "revoked": True,
            "epoch": P.dec(receipt.timestamp),
            "receiptId": P.hx(receipt.receipt_id),
        }

    def contract_in_scope(self, access: Access, record: ContractRecord) -> bool:
        """Whether ``access`` may see (and so act on) the caller's own contract ``record``.

        DESIGN.md "Capabilities": a token acts only on what it may see. A holder-wide token
        with no namespace limit sees every contract of its holder; any other token sees one only
        if every shard is a cell its own reads return, or, for an erased shard, a cell written
        in its session (the MAC-bound session tag of the cell record; namespace-limited tokens
        cannot tell an erased cell's namespace, so for them an erased shard is out of scope).
        """
        if record.holder != access.holder_id:
            return False
        if access.all_sessions and access.namespaces is None:
            return True
        shards = list(record.shards)
        visible = {
            c.cell.cell_id for c in self.store.read(access, cell_ids=shards, include_shared=False)
        }
        tag = (
            None
            if access.all_sessions
            else self.store.session_tag(access.holder_id, access.session_id)
        )
        with self.store.read_txn() as txn:
            for shard in shards:
                if shard in visible:
                    continue
                cell = self.store.projections.cells.get(txn, shard)
                erased_here = (
                    cell is not None
                    and cell.erased
                    and access.namespaces is None
                    and tag is not None
                    and cell.session_tag == tag
                )
                if not erased_here:
                    return False
        return True

    def _accept(self, access: Access, params: object) -> dict:
        return self._respond(access, params, accept=True)

    def _decline(self, access: Access, params: object) -> dict:
        return self._respond(access, params, accept=False)

    def _respond(self, access: Access, params: object, *, accept: bool) -> dict:
        p = P.check_params(params, {"contractId"}, {"contractId"})
        contract_id = P.id32(p.get("contractId"), code="contract_not_found", what="contractId")
        return self.respond(access, contract_id, accept=accept)

    def respond(self, access: Access, contract_id: bytes, *, accept: bool) -> dict:
        """A grantee accepts a contract, or declines it (withdrawing an earlier acceptance)."""
        with self.store.read_txn() as txn:
            record = self.store.projections.contracts.get(txn, contract_id)
        if record is None:
            raise NotFound("no such contract", code="contract_not_found")
        if access.holder_id not in record.grantees:
            raise NotPermitted("the caller is not a grantee", code="not_grantee")
        if record.revoked and accept:
            raise Conflict("the contract is revoked", code="contract_revoked")
        result = {"contractId": P.hx(contract_id), "accepted": accept}
        if (access.holder_id in record.accepted) == accept:
            return result
        op = Operation.ACCEPT if accept else Operation.DECLINE
        receipt = sign_receipt(
            self._key(access), subject_id=contract_id, operation=op, timestamp=self._now()
        )

        def guard(txn: Any) -> object:
            now_record = self.store.projections.contracts.get(txn, contract_id)
            if now_record is None:
                raise NotFound("no such contract", code="contract_not_found")
            return result if (access.holder_id in now_record.accepted) == accept else None

        change = self._commit(Change(receipts=[receipt], guard=guard))
        if change.outcome is None:
            result["receiptId"] = P.hx(receipt.receipt_id)
        return result
