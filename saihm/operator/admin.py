"""The person's actions (command line, the Memory Provider's vault): holders, grants, revocations.

These act for the person who runs the operator, not for a token: they take a holderId or a
grantId, sign with the holder's key from the store, and commit one :class:`Change` each
(docs/formats.md "GRANT detail", "Session revocation").
"""

from __future__ import annotations

import os
import secrets

from saihm.errors import ErrorCode, MalformedInput, NotFound
from saihm.events import Operation
from saihm.events.details import GrantDetail
from saihm.events.identity import HolderKey
from saihm.events.signing import sign_receipt
from saihm.names import check_namespace
from saihm.operator.context import ToolContext
from saihm.projections.grants import revocation_subject
from saihm.storage import WriteTxn
from saihm.store import Change

__all__ = ["AdminTools"]


class AdminTools:
    """create_holder, grant, revoke_session and ungrant, over one :class:`ToolContext`."""

    def __init__(self, context: ToolContext) -> None:
        self.context = context

    def create_holder(self) -> bytes:
        """Generate a holder seed and key, store the wrapped seed, log the KEY receipt;
        return the new holderId."""
        ctx = self.context
        seed = os.urandom(32)
        key = HolderKey.from_seed(seed)
        receipt = sign_receipt(
            key,
            subject_id=key.holder_id,
            operation=Operation.KEY,
            timestamp=ctx.now(),
            detail=key.public_key,
        )
        ctx.commit(Change(receipts=[receipt], seeds=[(key.holder_id, seed)]))
        return key.holder_id

    def grant(
        self, holder_id: bytes, namespaces: list[str] | None, expires_at: int
    ) -> tuple[bytes, bytes]:
        """Log a person's holder-wide grant (GRANT); return (grantId, receiptId).

        Raises :class:`NotFound` ("holder_not_found") for an unknown holder and
        :class:`~saihm.names.BadNamespace` for a namespace that is not a name.
        """
        for namespace in namespaces or ():
            check_namespace(namespace)
        ctx = self.context
        if not ctx.store.holder_known(holder_id):
            raise NotFound("no such holder", code=ErrorCode.HOLDER_NOT_FOUND)
        grant_id = secrets.token_bytes(32)
        detail = GrantDetail(
            namespaces=None if namespaces is None else tuple(namespaces), expires_at=expires_at
        )
        receipt = sign_receipt(
            ctx.holder_key(holder_id),
            subject_id=grant_id,
            operation=Operation.GRANT,
            timestamp=ctx.now(),
            detail=detail,
        )
        ctx.commit(Change(receipts=[receipt]))
        return grant_id, receipt.receipt_id

    def revoke_session(self, holder_id: bytes, token_or_session_id: bytes) -> bool:
        """Revoke every token of ``holder_id`` that carries this tokenId (16 bytes) or sessionId
        (32 bytes): log UNGRANT whose subjectId is :func:`revocation_subject` (docs/formats.md
        "Session revocation"). False if it was already revoked. Raises ``NotFound`` for an
        unknown holder and ``MalformedInput`` for an id of another length."""
        if len(token_or_session_id) not in (16, 32):
            raise MalformedInput("give a tokenId (32 hex) or a sessionId (64 hex)")
        ctx = self.context
        subject = revocation_subject(holder_id, token_or_session_id)
        with ctx.store.questions() as q:
            if not q.holder_known(holder_id):
                raise NotFound("no such holder", code=ErrorCode.HOLDER_NOT_FOUND)
            if q.revoked(holder_id, token_or_session_id):
                return False
        receipt = sign_receipt(
            ctx.holder_key(holder_id),
            subject_id=subject,
            operation=Operation.UNGRANT,
            timestamp=ctx.now(),
        )

        def guard(txn: WriteTxn) -> object:
            return False if ctx.store.ask(txn).revoked(holder_id, token_or_session_id) else None

        change = ctx.commit(Change(receipts=[receipt], guard=guard))
        return change.outcome is None

    def ungrant(self, grant_id: bytes) -> bool:
        """Withdraw a grant (UNGRANT); False if it was already withdrawn. Raises
        :class:`NotFound` ("grant_not_found") for an unknown grant."""
        ctx = self.context
        grant = ctx.store.grant(grant_id)
        if grant is None:
            raise NotFound("no such grant", code=ErrorCode.GRANT_NOT_FOUND)
        if grant.revoked:
            return False
        receipt = sign_receipt(
            ctx.holder_key(grant.holder),
            subject_id=grant_id,
            operation=Operation.UNGRANT,
            timestamp=ctx.now(),
        )

        def guard(txn: WriteTxn) -> object:
            now_grant = ctx.store.ask(txn).grant(grant_id)
            if now_grant is None:
                raise NotFound("no such grant", code=ErrorCode.GRANT_NOT_FOUND)
            return False if now_grant.revoked else None

        change = ctx.commit(Change(receipts=[receipt], guard=guard))
        return change.outcome is None
