"""The caller's own memory and record (saihm-protocol "saihm_remember", "saihm_recall",
"saihm_forget", "saihm_status"; saihm's saihm_record and saihm_forget_session).

Each operation acts for an :class:`Access`, reads only through the store's read path, signs
outside any transaction and commits one :class:`Change` whose guard re-checks the rule inside
the write transaction. Results are typed (:class:`Remembered`, :class:`Recorded`,
:class:`Recalled`, :class:`Forgotten` or :class:`AlreadyErased`, :class:`ForgottenSession`,
:class:`Status`); :mod:`saihm.protocol` parses their params and renders them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, cast

from saihm.errors import Conflict, ErrorCode, MalformedInput, NotFound, NotPermitted
from saihm.events import Cell, Operation, SealedPayload
from saihm.events.envelope import seal_with_receipt
from saihm.events.signing import sign_receipt
from saihm.names import check_namespace
from saihm.operator.context import ToolContext
from saihm.operator.governance import GovernanceTools, ProposalSummary
from saihm.operator.sharing import SharingTools
from saihm.projections import RecordHead
from saihm.retrieval import analyse_query
from saihm.storage import WriteTxn
from saihm.store import Access, Change, Page, ReadRequest, RecallWindow

__all__ = [
    "RECORD_KINDS",
    "AlreadyErased",
    "ContractSummary",
    "Forgotten",
    "ForgottenSession",
    "IncomingContract",
    "MemoryTools",
    "RecallWindow",
    "Recalled",
    "Recorded",
    "Remembered",
    "Status",
]

RECORD_KINDS = ("said", "did", "end")
WINDOW_30_DAYS = 30 * 86_400

#: A :class:`Change` guard: runs inside the write transaction (saihm.store.commit).
Guard = Callable[[WriteTxn], object]


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
    governance, the token's session and expiry and (when any call was timed) the PRS ratio."""

    holder_id: bytes
    window_start: int
    receipts_in_window: int
    shards: dict[str, int]
    contracts: tuple[ContractSummary, ...]
    incoming: tuple[IncomingContract, ...]
    governance: tuple[ProposalSummary, ...]
    session_id: bytes | None
    prs: float | None
    #: The caller's token: when it expires (UNIX seconds) and its ``sessions`` ("one" for a
    #: session token, "all" for a person's holder-wide grant).
    token_expires_at: int | None = None
    token_sessions: str | None = None


class MemoryTools:
    """remember, record, recall, forget, forget_session and status, over one
    :class:`ToolContext`.

    ``sharing`` and ``governance`` are the operator's other parts that :meth:`status` reports
    on: which of the caller's contracts its token may see, and the proposals with their tallies.
    """

    def __init__(
        self, context: ToolContext, sharing: SharingTools, governance: GovernanceTools
    ) -> None:
        self.context = context
        self.sharing = sharing
        self.governance = governance

    # -- saihm_remember and saihm_record --------------------------------------------------

    def remember(
        self,
        access: Access,
        content: str,
        *,
        namespace: str = "memory",
        supersedes: bytes | None = None,
        metadata: str | None = None,
    ) -> Remembered:
        """Seal ``content`` into a new cell of the caller's session and log REMEMBER
        (saihm-protocol "saihm_remember").

        With ``supersedes`` (a cellId of the caller's, in the token's scope: DESIGN.md "Pinned
        additions for the third round") the old cell is forgotten in the same change: both
        receipts (REMEMBER, then FORGET of the old cell) are logged in one transaction, or
        neither. The new cell's sealed payload names the old one (``supersedes``), so recall
        can show which cell a cell replaced, also after ``saihm rebuild``.

        ``metadata`` (the compact JSON of an object, :func:`saihm.events.models.check_metadata`)
        is sealed beside ``content``: recall returns it, nothing ranks or shows it as content.

        Raises :class:`MalformedInput` ("empty_content") for content that is only whitespace,
        ("no_session") for a token with no session, and :class:`NotPermitted` ("not_holder")
        for a namespace outside the token's scope. For ``supersedes``: :class:`NotFound`
        ("not_found") for a cell never stored, :class:`NotPermitted` ("not_holder") for one the
        caller does not hold or may not see, and :class:`NotFound` ("erased") for one already
        erased (also when another call erased it first); nothing is written then.
        """
        if not content.strip():
            raise MalformedInput("content is empty", code=ErrorCode.EMPTY_CONTENT)
        session = _check_writable(access, namespace)
        if supersedes is not None:
            self._check_supersedable(access, supersedes)
        payload = SealedPayload(
            content=content,
            session_id=session,
            namespace=namespace,
            kind="memory",
            supersedes=supersedes,
            metadata=metadata,
        )
        guard = None if supersedes is None else self._live_guard(supersedes)
        change, cell = self._cell_change(access, payload, None, guard)
        if supersedes is not None:
            self._forget_in(change, access, supersedes, cell.timestamp)
        self.context.commit(change)
        return _cell_result(cell, change)

    def _forget_in(self, change: Change, access: Access, cell_id: bytes, timestamp: int) -> None:
        """Add the FORGET of ``cell_id`` (its receipt after the change's REMEMBER, and its
        wrapped DEK destroyed) to ``change``: a supersede is one change."""
        change.receipts.append(
            sign_receipt(
                self.context.key(access),
                subject_id=cell_id,
                operation=Operation.FORGET,
                timestamp=timestamp,
            )
        )
        change.destroy.append(cell_id)

    def check_supersedable(self, access: Access, cell_id: bytes) -> None:
        """Refuse, as :meth:`remember` would, a ``supersedes`` that ``access`` could not
        forget (for a write prepared now and committed later: a provider proposal)."""
        self._check_supersedable(access, cell_id)

    def _check_supersedable(self, access: Access, cell_id: bytes) -> None:
        """Refuse a ``supersedes`` the caller could not forget (see :meth:`remember`)."""
        ctx = self.context
        record = ctx.store.cell_record(cell_id)
        if record is None:
            raise NotFound("supersedes names no stored cell", code=ErrorCode.NOT_FOUND)
        if record.owner != access.holder_id:
            raise NotPermitted("the caller does not hold this cell", code=ErrorCode.NOT_HOLDER)
        if record.erased:
            raise NotFound("the superseded cell is already erased", code=ErrorCode.ERASED)
        if not ctx.store.read(access, cell_ids=[cell_id], include_shared=False):
            with ctx.store.questions() as q:
                if q.cell_erased(cell_id):
                    raise NotFound("the superseded cell is already erased", code=ErrorCode.ERASED)
            raise NotPermitted("the cell is outside this token's scope", code=ErrorCode.NOT_HOLDER)

    def _live_guard(self, cell_id: bytes) -> Guard:
        """Refuse the change (nothing written) if ``cell_id`` was erased meanwhile."""
        store = self.context.store

        def guard(txn: WriteTxn) -> object:
            if store.ask(txn).cell_erased(cell_id):
                raise NotFound("the superseded cell is already erased", code=ErrorCode.ERASED)
            return None

        return guard

    def remember_sealed(
        self,
        access: Access,
        cell: Cell,
        session_id: bytes,
        guard: Guard | None = None,
        supersedes: bytes | None = None,
    ) -> Remembered:
        """Log REMEMBER for a cell sealed earlier by this operator (a held Memory Provider
        proposal, RFC 0007 "never silent agent write") and store it, as :meth:`remember`
        stores a new one.

        ``cell`` must be signed by ``access``'s holder and sealed into ``session_id`` of that
        holder; the caller checked its plaintext through the read path. ``guard`` runs inside
        the write transaction (:class:`Change`), for example to take the proposal atomically.
        The receipt's timestamp is now; the cell keeps the one it was sealed with.

        With ``supersedes`` (the payload's, which the caller read) the cell replaces that one as
        in :meth:`remember`: checked now against ``access``, re-checked inside the transaction,
        and its FORGET written in the same change.
        """
        if cell.holder_id != access.holder_id:
            raise NotPermitted("the cell is not the caller's", code=ErrorCode.NOT_HOLDER)
        if supersedes is not None:
            self._check_supersedable(access, supersedes)
            # The read-only check first: a refusal must come before the proposal is taken.
            guard = _both(self._live_guard(supersedes), guard)
        now = self.context.now()
        change = self._change_for(access, cell, session_id, None, guard, (), now)
        if supersedes is not None:
            self._forget_in(change, access, supersedes, now)
        self.context.commit(change)
        return _cell_result(cell, change)

    def _cell_change(
        self,
        access: Access,
        payload: SealedPayload,
        record: tuple[int, bool] | None,
        guard: Guard | None = None,
    ) -> tuple[Change, Cell]:
        ctx = self.context
        cell, dek, receipt = seal_with_receipt(
            payload,
            key=ctx.key(access),
            kek_version=ctx.store.kek_version,
            tier=ctx.config.tier,
            timestamp=ctx.now(),
        )
        deks = [(cell.cell_id, dek)]
        change = ctx.store.cell_change(
            cell, receipt, payload.session_id, deks=deks, record=record, guard=guard
        )
        return change, cell

    def _change_for(
        self,
        access: Access,
        cell: Cell,
        session_id: bytes,
        record: tuple[int, bool] | None,
        guard: Guard | None,
        deks: Sequence[tuple[bytes, bytes]],
        timestamp: int,
    ) -> Change:
        """The one Change that stores a sealed cell with its REMEMBER receipt
        (:meth:`Store.cell_change` builds its private body)."""
        receipt = sign_receipt(
            self.context.key(access),
            subject_id=cell.cell_id,
            operation=Operation.REMEMBER,
            timestamp=timestamp,
        )
        return self.context.store.cell_change(
            cell, receipt, session_id, deks=deks, record=record, guard=guard
        )

    def record(
        self, access: Access, content: str, kind: str, *, metadata: str | None = None
    ) -> Recorded:
        """Append a record cell to the caller's session chain (seq, prev); "end" closes it.
        ``metadata`` is sealed beside ``content`` as in :meth:`remember`.

        Raises :class:`MalformedInput` ("invalid_kind") for a kind other than said, did or
        end, ("empty_content") for empty content of said or did, and :class:`Conflict`
        ("record_ended") after the session's record ended.
        """
        if kind not in RECORD_KINDS:
            raise MalformedInput("kind must be said, did or end", code=ErrorCode.INVALID_KIND)
        if kind != "end" and not content.strip():
            raise MalformedInput("content is empty", code=ErrorCode.EMPTY_CONTENT)
        session = _check_writable(access, "record")
        store = self.context.store
        holder = access.holder_id
        for _ in range(5):
            with store.read_txn() as txn:
                head = store.record_head(txn, holder, session)
            if head is not None and head.ended:
                raise Conflict("this session's record has ended", code=ErrorCode.RECORD_ENDED)
            seq = 0 if head is None else head.seq + 1
            prev = None if head is None else head.cell_id
            payload = SealedPayload(
                content=content,
                session_id=session,
                namespace="record",
                kind=cast(Literal["said", "did", "end"], kind),  # checked against RECORD_KINDS
                seq=seq,
                prev=prev,
                metadata=metadata,
            )

            def guard(txn: WriteTxn, expected: RecordHead | None = head) -> None:
                if store.record_head(txn, holder, session) != expected:
                    raise _Retry()

            change, cell = self._cell_change(access, payload, (seq, kind == "end"), guard)
            try:
                self.context.commit(change)
            except _Retry:
                continue
            done = _cell_result(cell, change)
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
        # The request is built once, here, and carries the window as the edge parsed it.
        request = ReadRequest(access, analyse_query(query), window=window)
        page = self.context.store.reader.read_page(request)
        if self.context.config.recall_receipts:
            self.context.log_receipt(access, Operation.RECALL)
        return Recalled(page=page, window=window, queried=queried)

    # -- saihm_forget and saihm_forget_session --------------------------------------------

    def forget(self, access: Access, cell_id: bytes) -> Forgotten | AlreadyErased:
        """Erase one cell: withdraw it, destroy its wrapped DEK, log FORGET (one transaction;
        saihm-protocol "saihm_forget", "Erasure"). A cell never stored or already erased is
        :class:`AlreadyErased`; one the caller does not hold, or outside the token's scope,
        raises :class:`NotPermitted` ("not_holder")."""
        ctx = self.context
        record = ctx.store.cell_record(cell_id)
        if record is None:
            return AlreadyErased()
        if record.owner != access.holder_id:
            raise NotPermitted("the caller does not hold this cell", code=ErrorCode.NOT_HOLDER)
        if record.erased:
            return AlreadyErased()
        if not ctx.store.read(access, cell_ids=[cell_id], include_shared=False):
            # The read sees no erased cell: one erased since the check above (another writer's
            # forget) is already erased, not out of scope. Erasure is final, so a second look
            # decides.
            with ctx.store.questions() as q:
                if q.cell_erased(cell_id):
                    return AlreadyErased()
            raise NotPermitted("the cell is outside this token's scope", code=ErrorCode.NOT_HOLDER)
        receipt = sign_receipt(
            ctx.key(access),
            subject_id=cell_id,
            operation=Operation.FORGET,
            timestamp=ctx.now(),
        )
        change = ctx.commit(
            Change(receipts=[receipt], destroy=[cell_id], guard=self._unerased_guard([cell_id]))
        )
        if change.outcome is not None:
            return AlreadyErased()
        return Forgotten(
            cell_id=cell_id, destruction_anchor=receipt.receipt_id, epoch=receipt.timestamp
        )

    def _unerased_guard(self, cell_ids: list[bytes]) -> Guard:
        store = self.context.store

        def guard(txn: WriteTxn) -> object:
            q = store.ask(txn)
            for cell_id in cell_ids:
                if q.cell_erased(cell_id):
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
        ctx = self.context
        cells = [
            c
            for c in ctx.store.read(access, include_shared=False)
            if c.payload.session_id == session_id
        ]
        ids = [c.cell.cell_id for c in cells]
        key = ctx.key(access)
        now = ctx.now()
        receipts = [
            sign_receipt(key, subject_id=i, operation=Operation.FORGET, timestamp=now) for i in ids
        ]
        if receipts:
            change = ctx.commit(
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
        ctx = self.context
        store = ctx.store
        now = ctx.now()
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
            for opened in store.read(access, include_shared=False):
                shards[opened.cell.tier] = shards.get(opened.cell.tier, 0) + 1
        with store.questions() as q:
            for cell_id in q.live_cells_of_holder(holder):
                # The index is a hint; the sealed cell record must name this holder, live.
                record = q.cell_record(cell_id) if holder_wide else None
                if record is not None and record.owner == holder and not record.erased:
                    shards[record.tier] = shards.get(record.tier, 0) + 1
            for contract_id, c in q.contracts_of_holder(holder):
                if not c.revoked and self.sharing.contract_in_scope(access, c):
                    contracts.append(
                        ContractSummary(contract_id, c.mode, tuple(c.grantees), c.expires_at)
                    )
            for contract_id, c in q.contracts_to_grantee(holder):
                if not c.revoked and holder in c.grantees:
                    incoming.append(
                        IncomingContract(
                            contract_id, c.holder, c.mode, holder in c.accepted, c.expires_at
                        )
                    )
            for ts in q.receipt_times_of_holder(holder):
                receipts_in_window += ts >= start
            if ctx.config.governance:
                governance = self.governance.proposals(q)
        calls, within = store.stats_since(start)
        if ctx.config.status_receipts:
            ctx.log_receipt(access, Operation.STATUS)
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
            token_expires_at=access.expires_at,
            token_sessions="all" if access.all_sessions else "one",
        )


def _check_writable(access: Access, namespace: str) -> bytes:
    """Refuse a write the token may not make: a namespace that is not a name
    (:class:`~saihm.names.BadNamespace`, ``bad_namespace``) or out of scope, no session.
    Returns the session the write goes into."""
    check_namespace(namespace)
    session = access.own_session()
    if access.namespaces is not None and namespace not in access.namespaces:
        raise NotPermitted("namespace outside the token's scope", code=ErrorCode.NOT_HOLDER)
    return session


def _cell_result(cell: Cell, change: Change) -> Remembered:
    return Remembered(
        cell_id=cell.cell_id,
        cell_nonce=cell.cell_nonce,
        tier=cell.tier,
        kek_version=cell.kek_version,
        epoch=cell.timestamp,
        signature_prefix=cell.signature[:16],
        receipt_id=change.receipts[0].receipt_id,
    )


class _Retry(Conflict):
    """A record chain moved between reading its head and committing; re-seal and retry."""


def _both(first: Guard, second: Guard | None) -> Guard:
    """A guard that runs ``first``, then ``second`` (if any); the first refusal or outcome
    wins. ``first`` must write nothing: a refusal by ``second`` cannot undo its writes."""

    def guard(txn: WriteTxn) -> object:
        outcome = first(txn)
        if outcome is not None or second is None:
            return outcome
        return second(txn)

    return guard
