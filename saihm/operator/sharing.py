"""Sharing contracts (saihm-protocol "Sharing contracts"): share, revoke, accept, decline.

Operations take bytes ids and return :class:`Shared`, :class:`Revoked` and
:class:`Responded`; :mod:`saihm.protocol` parses their params and renders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from saihm.errors import Conflict, ErrorCode, MalformedInput, NotFound, NotPermitted
from saihm.events import Operation
from saihm.events.rules import check_contract_terms
from saihm.events.signing import sign_contract, sign_receipt
from saihm.operator.context import ToolContext
from saihm.projections import ContractRecord
from saihm.storage import WriteTxn
from saihm.store import Access, Change

__all__ = ["MODES", "Responded", "Revoked", "Shared", "SharingTools"]

MODES = {"temporary": "TEMPORARY", "permanent": "PERMANENT", "syndicate": "SYNDICATE"}


@dataclass(frozen=True, slots=True)
class Shared:
    """A signed, stored contract (saihm_share "Result"); ``mode`` is the contract's
    (TEMPORARY, PERMANENT or SYNDICATE)."""

    contract_id: bytes
    mode: str
    grantee_count: int
    epoch: int
    expires_at: int
    receipt_id: bytes


@dataclass(frozen=True, slots=True)
class Revoked:
    """A contract that is revoked now; ``receipt_id`` is None when it already was."""

    epoch: int
    receipt_id: bytes | None = None


@dataclass(frozen=True, slots=True)
class Responded:
    """A grantee's acceptance state of a contract; ``receipt_id`` None when unchanged."""

    contract_id: bytes
    accepted: bool
    receipt_id: bytes | None = None


class SharingTools:
    """saihm_share, saihm_revoke_share and the grantee's accept and decline, over one
    :class:`ToolContext`."""

    def __init__(self, context: ToolContext) -> None:
        self.context = context

    def share(
        self,
        access: Access,
        grantees: list[bytes],
        shards: list[bytes],
        mode: str,
        scope: str,
        expiry: int | None,
    ) -> Shared:
        """Sign and store a sharing contract over the caller's own cells; log SHARE
        (saihm-protocol "saihm_share"). ``mode`` is TEMPORARY, PERMANENT or SYNDICATE;
        ``expiry`` None takes the type's default."""
        ctx = self.context
        store = ctx.store
        now = ctx.now()
        if expiry is None:
            expiry = now + ctx.config.temporary_default_ttl if mode == "TEMPORARY" else 0
        if access.holder_id in grantees:
            raise MalformedInput("a holder cannot grant to itself", code=ErrorCode.INVALID_GRANTEE)
        check_contract_terms(
            grantee_ids=grantees,
            shard_ids=shards,
            mode=mode,
            scope=scope,
            expires_at=expiry,
            timestamp=now,
        )
        with store.questions() as q:
            records = q.cell_records(shards)
        for record in records:
            if record is None or record.erased:
                raise NotFound("no such cell", code=ErrorCode.SHARD_NOT_FOUND)
            if record.owner != access.holder_id:
                raise NotPermitted("the caller does not hold this cell", code=ErrorCode.NOT_HOLDER)
        visible = store.read(access, cell_ids=shards, include_shared=False)
        if len(visible) != len(set(shards)):
            raise NotPermitted("a cell is outside this token's scope", code=ErrorCode.NOT_HOLDER)
        key = ctx.key(access)
        contract = sign_contract(
            key,
            grantee_ids=grantees,
            shard_ids=shards,
            mode=mode,
            scope=scope,
            expires_at=expiry,
            timestamp=now,
        )
        receipt = sign_receipt(
            key, subject_id=contract.contract_id, operation=Operation.SHARE, timestamp=now
        )

        def guard(txn: WriteTxn) -> None:
            q = store.ask(txn)
            for shard in shards:
                if q.cell_erased(shard):
                    raise NotFound("a cell was erased", code=ErrorCode.SHARD_NOT_FOUND)

        ctx.commit(store.contract_change(contract, receipt, guard))
        return Shared(
            contract_id=contract.contract_id,
            mode=mode,
            grantee_count=len(grantees),
            epoch=now,
            expires_at=expiry,
            receipt_id=receipt.receipt_id,
        )

    def revoke_share(self, access: Access, contract_id: bytes) -> Revoked:
        """End a contract for every grantee; a repeat answers revoked = true with no receipt
        (saihm-protocol "saihm_revoke_share")."""
        ctx = self.context
        record = ctx.store.contract(contract_id)
        if record is None:
            raise NotFound("no such contract", code=ErrorCode.CONTRACT_NOT_FOUND)
        if record.holder != access.holder_id or not self.contract_in_scope(access, record):
            raise NotPermitted("the caller does not hold this contract", code=ErrorCode.NOT_HOLDER)
        if record.revoked:
            return Revoked(epoch=ctx.now())
        receipt = sign_receipt(
            ctx.key(access),
            subject_id=contract_id,
            operation=Operation.REVOKE,
            timestamp=ctx.now(),
        )

        def guard(txn: WriteTxn) -> object:
            now_record = ctx.store.ask(txn).contract(contract_id)
            if now_record is None:
                raise NotFound("no such contract", code=ErrorCode.CONTRACT_NOT_FOUND)
            if now_record.revoked:
                return Revoked(epoch=ctx.now())
            return None

        change = ctx.commit(Change(receipts=[receipt], guard=guard))
        if isinstance(change.outcome, Revoked):
            return change.outcome
        return Revoked(epoch=receipt.timestamp, receipt_id=receipt.receipt_id)

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
        store = self.context.store
        shards = list(record.shards)
        visible = {
            c.cell.cell_id for c in store.read(access, cell_ids=shards, include_shared=False)
        }
        session = None if access.all_sessions else access.own_session()
        with store.questions() as q:
            for shard in shards:
                if shard in visible:
                    continue
                cell = q.cell_record(shard)
                erased_here = (
                    cell is not None
                    and cell.erased
                    and access.namespaces is None
                    and session is not None
                    and store.in_session(cell, access.holder_id, session)
                )
                if not erased_here:
                    return False
        return True

    def respond(self, access: Access, contract_id: bytes, *, accept: bool) -> Responded:
        """A grantee accepts a contract, or declines it (withdrawing an earlier acceptance);
        DESIGN.md "Capabilities" (ACCEPT / DECLINE). A repeat changes nothing and logs no
        receipt."""
        ctx = self.context
        record = ctx.store.contract(contract_id)
        if record is None:
            raise NotFound("no such contract", code=ErrorCode.CONTRACT_NOT_FOUND)
        if access.holder_id not in record.grantees:
            raise NotPermitted("the caller is not a grantee", code=ErrorCode.NOT_GRANTEE)
        if record.revoked and accept:
            raise Conflict("the contract is revoked", code=ErrorCode.CONTRACT_REVOKED)
        result = Responded(contract_id=contract_id, accepted=accept)
        if (access.holder_id in record.accepted) == accept:
            return result
        op = Operation.ACCEPT if accept else Operation.DECLINE
        receipt = sign_receipt(
            ctx.key(access), subject_id=contract_id, operation=op, timestamp=ctx.now()
        )

        def guard(txn: WriteTxn) -> object:
            now_record = ctx.store.ask(txn).contract(contract_id)
            if now_record is None:
                raise NotFound("no such contract", code=ErrorCode.CONTRACT_NOT_FOUND)
            return result if (access.holder_id in now_record.accepted) == accept else None

        change = ctx.commit(Change(receipts=[receipt], guard=guard))
        if change.outcome is None:
            return Responded(
                contract_id=contract_id, accepted=accept, receipt_id=receipt.receipt_id
            )
        return result
