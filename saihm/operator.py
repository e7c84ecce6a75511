"""The SAIHM operations and their rules over the store (saihm-protocol, custodial profile).

Each operation acts for an :class:`Access` that :meth:`Store.authenticate` (a bearer token) or
:meth:`Store.person_access` (the person, in process) issued, reads only through
:meth:`Store.read`, signs outside any transaction, and commits one :class:`Change` whose guard
re-checks the rule inside the write transaction. Operations take bytes ids and ints and
return typed results (:class:`Remembered`, :class:`Recalled`, :class:`Forgotten` or
:class:`AlreadyErased`, :class:`Status`, ...); the JSON binding that parses the protocol's
params and renders these results is :mod:`saihm.http.binding` (docs/internals.md "Adding an
operation").
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from saihm.errors import Conflict, ErrorCode, MalformedInput, NotFound, NotPermitted
from saihm.events import Operation, SealedPayload
from saihm.events.details import GrantDetail
from saihm.events.envelope import seal
from saihm.events.identity import HolderKey
from saihm.events.signing import sign_receipt
from saihm.governance import GovernanceTools, ProposalSummary
from saihm.projections import Body, RecordHead
from saihm.projections.grants import revocation_subject
from saihm.recallwindow import (
    RecallWindow,
)
from saihm.sharing import SharingTools
from saihm.store import Access, Change, Page

__all__ = [
    "RECORD_KINDS",
    "AlreadyErased",
    "ContractSummary",
    "Forgotten",
    "ForgottenSession",
    "IncomingContract",
    "Operator",
    "Recalled",
    "Recorded",
    "Remembered",
    "Status",
]

RECORD_KINDS = ("said", "did", "end")
WINDOW_30_DAYS = 30 * 86_400


@dataclass(frozen=True, slots=True)
class Remembered:
    """A new cell (saihm_remember "Result"): its id, nonce, tier, KEK version, timestamp, the
    first 16 bytes of its holder signature and the REMEMBER receipt's id."""

    cell_id: bytes
    cell_nonce: bytes
    tier: str
    kek_version: int
    epoch: int
    signature_prefix: bytes
    receipt_id: bytes


@dataclass(frozen=True, slots=True)
class Recorded(Remembered):
    """A new record cell: a :class:`Remembered` with its place in the session's chain."""

    seq: int
    prev: bytes | None
    kind: str


@dataclass(frozen=True, slots=True)
class Recalled:
    """One recall: the verified cells of ``page`` (with their scores for a query) and the
    window the caller asked for; the binding renders them and applies ``maxBytes``."""

    page: Page
    window: RecallWindow
    queried: bool


@dataclass(frozen=True, slots=True)
class Forgotten:
    """An erased cell (saihm_forget "Result"): the FORGET receipt is its destruction anchor."""

    cell_id: bytes
    destruction_anchor: bytes
    epoch: int


@dataclass(frozen=True, slots=True)
class AlreadyErased:
    """saihm_forget of a cell that is not live: never stored, or erased before (idempotent)."""


@dataclass(frozen=True, slots=True)
class ForgottenSession:
    """Every cell of one session erased: their ids and their FORGET receipts' ids."""

    session_id: bytes
    cell_ids: tuple[bytes, ...]
    receipt_ids: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class ContractSummary:
    """One live contract the caller granted (status ``contracts``)."""

    contract_id: bytes
    mode: str
    grantee_ids: tuple[bytes, ...]
    expires_at: int


@dataclass(frozen=True, slots=True)
class IncomingContract:
    """One live contract naming the caller as grantee (status ``incomingContracts``)."""

    contract_id: bytes
    holder_id: bytes
    mode: str
    accepted: bool
    expires_at: int


@dataclass(frozen=True, slots=True)
class Status:
    """saihm_status "Result": identity, the 30-day receipt window, shards, contracts,
    governance, the token's session and (when any call was timed) the PRS ratio."""

    holder_id: bytes
    window_start: int
    receipts_in_window: int
    shards: dict[str, int]
    contracts: tuple[ContractSummary, ...]
    incoming: tuple[IncomingContract, ...]
    governance: tuple[ProposalSummary, ...]
    session_id: bytes | None
    prs: float | None


class Operator(SharingTools, GovernanceTools):
    """The eight tools, the extension methods of DESIGN.md, and the person's admin actions.

    Every operation takes an :class:`Access` from :meth:`Store.authenticate`; in-process callers
    (the Memory Provider, agent code) call them directly, the HTTP binding after parsing.
    """

    # -- saihm_remember and saihm_record --------------------------------------------------

    def remember(self, access: Access, content: str, *, namespace: str = "memory") -> Remembered:
        """Seal ``content`` into a new cell of the caller's session and log REMEMBER
        (saihm-protocol "saihm_remember").

        Raises :class:`MalformedInput` ("empty_content") for content that is only whitespace,
        ("no_session") for a token with no session, and :class:`NotPermitted` ("not_holder")
        for a namespace outside the token's scope.
        """
        if not content.strip():
            raise MalformedInput("content is empty", code=ErrorCode.EMPTY_CONTENT)
        self._check_writable(access, namespace)
        payload = SealedPayload(
            content=content, session_id=access.session_id, namespace=namespace, kind="memory"
        )
        change, cell = self._cell_change(access, payload, None)
        self._commit(change)
        return self._cell_result(cell, change)

    def remember_sealed(
        self,
        access: Access,
        cell: Any,
        session_id: bytes,
        guard: Callable[[Any], object] | None = None,
    ) -> Remembered:
        """Log REMEMBER for a cell sealed earlier by this operator (a held Memory Provider
        proposal, RFC 0007 "never silent agent write") and store it, as :meth:`remember`
        stores a new one.

        ``cell`` must be signed by ``access``'s holder and sealed into ``session_id`` of that
        holder; the caller checked its plaintext through the read path. ``guard`` runs inside
        the write transaction (:class:`Change`), for example to take the proposal atomically.
        The receipt's timestamp is now; the cell keeps the one it was sealed with.
        """
        if cell.holder_id != access.holder_id:
            raise NotPermitted("the cell is not the caller's", code=ErrorCode.NOT_HOLDER)
        change = self._change_for(access, cell, session_id, None, guard, (), self._now())
        return self._commit_cell(cell, change)

    def _check_writable(self, access: Access, namespace: str) -> None:
        if not namespace or len(namespace) > 256:
            raise MalformedInput("namespace must be 1 to 256 characters")
        if access.session_id is None:
            raise MalformedInput(
                "this token names no session to write into", code=ErrorCode.NO_SESSION
            )
        if access.namespaces is not None and namespace not in access.namespaces:
            raise NotPermitted("namespace outside the token's scope", code=ErrorCode.NOT_HOLDER)

    def _cell_change(
        self,
        access: Access,
        payload: SealedPayload,
        record: tuple[int, bool] | None,
        guard: Callable[[Any], object] | None = None,
    ) -> tuple[Change, Any]:
        key = self._key(access)
        cell, dek = seal(
            payload,
            key=key,
            kek_version=self.store.kek_dir.current_version,
            tier=self.config.tier,
            timestamp=self._now(),
        )
        change = self._change_for(
            access, cell, access.session_id, record, guard, [(cell.cell_id, dek)], cell.timestamp
        )
        return change, cell

    def _change_for(
        self,
        access: Access,
        cell: Any,
        session_id: bytes,
        record: tuple[int, bool] | None,
        guard: Callable[[Any], object] | None,
        deks: Any,
        timestamp: int,
    ) -> Change:
        """The one Change that stores a sealed cell with its REMEMBER receipt."""
        receipt = sign_receipt(
            self._key(access),
            subject_id=cell.cell_id,
            operation=Operation.REMEMBER,
            timestamp=timestamp,
        )
        cell_bytes = cell.to_cbor()
        body = Body(
            cell_bytes,
            self.store.session_tag(access.holder_id, session_id),
            None if record is None else record[0],
            False if record is None else record[1],
        )
        return Change(
            receipts=[receipt],
            bodies={cell.cell_id: body},
            deks=list(deks),
            memo=[(cell.cell_id, cell_bytes)],
            guard=guard,
        )

    def _commit_cell(self, cell: Any, change: Change) -> Remembered:
        self._commit(change)
        return self._cell_result(cell, change)

    @staticmethod
    def _cell_result(cell: Any, change: Change) -> Remembered:
        return Remembered(
            cell_id=cell.cell_id,
            cell_nonce=cell.cell_nonce,
            tier=cell.tier,
            kek_version=cell.kek_version,
            epoch=cell.timestamp,
            signature_prefix=cell.signature[:16],
            receipt_id=change.receipts[0].receipt_id,
        )

    def record(self, access: Access, content: str, kind: str) -> Recorded:
        """Append a record cell to the caller's session chain (seq, prev); "end" closes it.

        Raises :class:`MalformedInput` ("invalid_kind") for a kind other than said, did or
        end, ("empty_content") for empty content of said or did, and :class:`Conflict`
        ("record_ended") after the session's record ended.
        """
        if kind not in RECORD_KINDS:
            raise MalformedInput("kind must be said, did or end", code=ErrorCode.INVALID_KIND)
        if kind != "end" and not content.strip():
            raise MalformedInput("content is empty", code=ErrorCode.EMPTY_CONTENT)
        self._check_writable(access, "record")
        tag = self.store.session_tag(access.holder_id, access.session_id)
        for _ in range(5):
            with self.store.read_txn() as txn:
                head = self.store.projections.cells.record_head(txn, tag)
            if head is not None and head.ended:
                raise Conflict("this session's record has ended", code=ErrorCode.RECORD_ENDED)
            seq = 0 if head is None else head.seq + 1
            prev = None if head is None else head.cell_id
            payload = SealedPayload(
                content=content,
                session_id=access.session_id,
                namespace="record",
                kind=cast(Literal["said", "did", "end"], kind),  # checked against RECORD_KINDS
                seq=seq,
                prev=prev,
            )

            def guard(txn: Any, expected: RecordHead | None = head) -> None:
                if self.store.projections.cells.record_head(txn, tag) != expected:
                    raise _Retry()

            change, cell = self._cell_change(access, payload, (seq, kind == "end"), guard)
            try:
                self._commit(change)
            except _Retry:
                continue
            done = self._cell_result(cell, change)
            return Recorded(
                cell_id=done.cell_id,
                cell_nonce=done.cell_nonce,
                tier=done.tier,
                kek_version=done.kek_version,
                epoch=done.epoch,
                signature_prefix=done.signature_prefix,
                receipt_id=done.receipt_id,
                seq=seq,
                prev=prev,
                kind=kind,
            )
        raise Conflict(
            "the record changed under this call; try again", code=ErrorCode.RECORD_CONFLICT
        )

    # -- saihm_recall ---------------------------------------------------------------------

    def recall(
        self, access: Access, query: str | None, window: RecallWindow | None = None
    ) -> Recalled:
        """The caller's cells in scope and the covered cells of active contracts that match
        ``query``, most relevant first (all cells in log order for an empty query), within
        ``window``'s limit, cursor, namespaces and kinds (docs/retrieval.md "Extension
        params"); ``maxBytes`` bounds the rendered answer, so the binding applies it.

        The query is never logged and never written to the RECALL receipt.
        """
        window = window or RecallWindow()
        queried = bool((query or "").split())
        page = self.store.read_page(
            access,
            query=query,
            namespaces=window.namespaces,
            kinds=window.kinds,
            limit=window.limit,
            start=window.start,
        )
        if self.config.recall_receipts:
            self.log_receipt(access, Operation.RECALL)
        return Recalled(page=page, window=window, queried=queried)

    # -- saihm_forget and saihm_forget_session --------------------------------------------

    def forget(self, access: Access, cell_id: bytes) -> Forgotten | AlreadyErased:
        """Erase one cell: withdraw it, destroy its wrapped DEK, log FORGET (one transaction;
        saihm-protocol "saihm_forget", "Erasure"). A cell never stored or already erased is
        :class:`AlreadyErased`; one the caller does not hold, or outside the token's scope,
        raises :class:`NotPermitted` ("not_holder")."""
        with self.store.read_txn() as txn:
            record = self.store.projections.cells.get(txn, cell_id)
        if record is None:
            return AlreadyErased()
        if record.owner != access.holder_id:
            raise NotPermitted("the caller does not hold this cell", code=ErrorCode.NOT_HOLDER)
        if record.erased:
            return AlreadyErased()
        if not self.store.read(access, cell_ids=[cell_id], include_shared=False):
            raise NotPermitted("the cell is outside this token's scope", code=ErrorCode.NOT_HOLDER)
        receipt = sign_receipt(
            self._key(access),
            subject_id=cell_id,
            operation=Operation.FORGET,
            timestamp=self._now(),
        )
        change = self._commit(
            Change(receipts=[receipt], destroy=[cell_id], guard=self._unerased_guard([cell_id]))
        )
        if change.outcome is not None:
            return AlreadyErased()
        return Forgotten(
            cell_id=cell_id, destruction_anchor=receipt.receipt_id, epoch=receipt.timestamp
        )

    def _unerased_guard(self, cell_ids: list[bytes]) -> Callable[[Any], object]:
        def guard(txn: Any) -> object:
            for cell_id in cell_ids:
                if self.store.projections.cells.is_erased(txn, cell_id):
                    return AlreadyErased()
            return None

        return guard

    def forget_session(self, access: Access, session_id: bytes) -> ForgottenSession:
        """Erase every cell (memory and record) of one session; every receipt stays.

        Raises :class:`NotPermitted` ("not_holder") for a session outside the token's scope and
        :class:`Conflict` ("retry") when a cell was erased while the call ran.
        """
        if not access.all_sessions and session_id != access.session_id:
            raise NotPermitted(
                "the session is outside this token's scope", code=ErrorCode.NOT_HOLDER
            )
        cells = [
            c
            for c in self.store.read(access, include_shared=False)
            if c.payload.session_id == session_id
        ]
        ids = [c.cell.cell_id for c in cells]
        key = self._key(access)
        now = self._now()
        receipts = [
            sign_receipt(key, subject_id=i, operation=Operation.FORGET, timestamp=now) for i in ids
        ]
        if receipts:
            change = self._commit(
                Change(receipts=receipts, destroy=ids, guard=self._unerased_guard(ids))
            )
            if change.outcome is not None:
                raise Conflict(
                    "a cell was erased concurrently; repeat the call", code=ErrorCode.RETRY
                )
        return ForgottenSession(
            session_id=session_id,
            cell_ids=tuple(ids),
            receipt_ids=tuple(r.receipt_id for r in receipts),
        )

    # -- saihm_status ---------------------------------------------------------------------

    def status(self, access: Access) -> Status:
        """The caller's identity, reliability, receipt count, shards, contracts, governance
        (saihm-protocol "saihm_status")."""
        now = self._now()
        start = now - WINDOW_30_DAYS
        holder = access.holder_id
        shards: dict[str, int] = {}
        contracts: list[ContractSummary] = []
        incoming: list[IncomingContract] = []
        governance: list[ProposalSummary] = []
        receipts_in_window = 0
        holder_wide = access.all_sessions and access.namespaces is None
        if not holder_wide:
            # A session or namespace-limited token sees only what its own reads would return.
            for opened in self.store.read(access, include_shared=False):
                shards[opened.cell.tier] = shards.get(opened.cell.tier, 0) + 1
        records = self.store.projections
        with self.store.read_txn() as txn:
            for _, cell_id in records.cells.live_of_holder(txn, holder):
                # The index is a hint; the sealed cell record must name this holder, live.
                record = records.cells.get(txn, cell_id) if holder_wide else None
                if record is not None and record.owner == holder and not record.erased:
                    shards[record.tier] = shards.get(record.tier, 0) + 1
            for contract_id, c in records.contracts.of_holder(txn, holder):
                if not c.revoked and self.contract_in_scope(access, c):
                    contracts.append(
                        ContractSummary(contract_id, c.mode, tuple(c.grantees), c.expires_at)
                    )
            for contract_id, c in records.contracts.of_grantee(txn, holder):
                if not c.revoked and holder in c.grantees:
                    incoming.append(
                        IncomingContract(
                            contract_id, c.holder, c.mode, holder in c.accepted, c.expires_at
                        )
                    )
            for ts in records.receipts.timestamps_of_holder(txn, holder):
                receipts_in_window += ts >= start
            if self.config.governance:
                governance = self._proposals(txn)
        calls, within = self.store.stats_since(start)
        if self.config.status_receipts:
            self.log_receipt(access, Operation.STATUS)
        return Status(
            holder_id=holder,
            window_start=start,
            receipts_in_window=receipts_in_window,
            shards=shards,
            contracts=tuple(contracts),
            incoming=tuple(incoming),
            governance=tuple(governance),
            session_id=access.session_id,
            prs=round(within / calls, 6) if calls else None,
        )

    # -- the person's actions (command line) ----------------------------------------------

    def create_holder(self) -> bytes:
        """Generate a holder seed and key, store the wrapped seed, log the KEY receipt."""
        seed = os.urandom(32)
        key = HolderKey.from_seed(seed)
        receipt = sign_receipt(
            key,
            subject_id=key.holder_id,
            operation=Operation.KEY,
            timestamp=self._now(),
            detail=key.public_key,
        )
        self._commit(Change(receipts=[receipt], seeds=[(key.holder_id, seed)]))
        return key.holder_id

    def grant(
        self, holder_id: bytes, namespaces: list[str] | None, expires_at: int
    ) -> tuple[bytes, bytes]:
        """Log a person's holder-wide grant (GRANT); return (grantId, receiptId)."""
        with self.store.read_txn() as txn:
            if not self.store.projections.holders.known(txn, holder_id):
                raise NotFound("no such holder", code=ErrorCode.HOLDER_NOT_FOUND)
        grant_id = secrets.token_bytes(32)
        detail = GrantDetail(
            namespaces=None if namespaces is None else tuple(namespaces), expires_at=expires_at
        )
        receipt = sign_receipt(
            self.store.holder_key(holder_id),
            subject_id=grant_id,
            operation=Operation.GRANT,
            timestamp=self._now(),
            detail=detail,
        )
        self._commit(Change(receipts=[receipt]))
        return grant_id, receipt.receipt_id

    def revoke_session(self, holder_id: bytes, token_or_session_id: bytes) -> bool:
        """Revoke every token of ``holder_id`` that carries this tokenId (16 bytes) or sessionId
        (32 bytes): log UNGRANT whose subjectId is :func:`revocation_subject` (docs/formats.md
        "Session revocation"). False if it was already revoked. Raises ``NotFound`` for an
        unknown holder and ``MalformedInput`` for an id of another length."""
        if len(token_or_session_id) not in (16, 32):
            raise MalformedInput("give a tokenId (32 hex) or a sessionId (64 hex)")
        subject = revocation_subject(holder_id, token_or_session_id)
        grants = self.store.projections.grants
        with self.store.read_txn() as txn:
            if not self.store.projections.holders.known(txn, holder_id):
                raise NotFound("no such holder", code=ErrorCode.HOLDER_NOT_FOUND)
            if grants.revocation(txn, subject) is not None:
                return False
        key = self.store.holder_key(holder_id)
        receipt = sign_receipt(
            key, subject_id=subject, operation=Operation.UNGRANT, timestamp=self._now()
        )

        def guard(txn: Any) -> object:
            return False if grants.revocation(txn, subject) is not None else None

        change = self._commit(Change(receipts=[receipt], guard=guard))
        return change.outcome is None

    def ungrant(self, grant_id: bytes) -> bool:
        """Withdraw a grant (UNGRANT); False if it was already withdrawn."""
        with self.store.read_txn() as txn:
            grant = self.store.projections.grants.get(txn, grant_id)
        if grant is None:
            raise NotFound("no such grant", code=ErrorCode.GRANT_NOT_FOUND)
        if grant.revoked:
            return False
        receipt = sign_receipt(
            self.store.holder_key(grant.holder),
            subject_id=grant_id,
            operation=Operation.UNGRANT,
            timestamp=self._now(),
        )

        def guard(txn: Any) -> object:
            now_grant = self.store.projections.grants.get(txn, grant_id)
            if now_grant is None:
                raise NotFound("no such grant", code="grant_not_found")
            return False if now_grant.revoked else None

        change = self._commit(Change(receipts=[receipt], guard=guard))
        return change.outcome is None


class _Retry(Conflict):
    """A record chain moved between reading its head and committing; re-seal and retry."""
