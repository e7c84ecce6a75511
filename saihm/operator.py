"""The SAIHM operations and their rules over the store (saihm-protocol, custodial profile).

Each tool authenticates through :meth:`Store.authenticate`, reads only through
:meth:`Store.read`, signs outside any transaction, and commits one :class:`Change` whose guard
re-checks the rule inside the write transaction. Results are the protocol's JSON objects.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from typing import Any

from saihm import params as P
from saihm.config import Config
from saihm.errors import (
    Conflict,
    Disabled,
    MalformedInput,
    NotFound,
    NotPermitted,
)
from saihm.events import Operation, SealedPayload
from saihm.events.details import GrantDetail
from saihm.events.envelope import seal
from saihm.events.identity import HolderKey
from saihm.events.signing import sign_receipt
from saihm.governance import GovernanceTools
from saihm.projections import Body, RecordHead
from saihm.projections.grants import revocation_subject
from saihm.recallwindow import (
    RecallAnswer,
    RecallItem,
    RecallWindow,
    encode_cursor,
    item_bytes,
)
from saihm.sharing import SharingTools
from saihm.store import Access, Change, OpenedCell, Store

RECORD_KINDS = ("said", "did", "end")
RECALL_PARAMS = {"query", "limit", "maxBytes", "cursor", "namespaces", "kinds"}
WINDOW_30_DAYS = 30 * 86_400


class Operator(SharingTools, GovernanceTools):
    """The eight tools, the extension methods of DESIGN.md, and the person's admin actions."""

    def __init__(self, store: Store, config: Config | None = None) -> None:
        super().__init__(store, config)
        self._tools: dict[str, Callable[[Access, dict], Any]] = {
            "saihm_remember": self._remember,
            "saihm_recall": self._recall,
            "saihm_forget": self._forget,
            "saihm_status": self._status,
            "saihm_share": self._share,
            "saihm_revoke_share": self._revoke_share,
            "saihm_governance_propose": self._propose,
            "saihm_governance_vote": self._vote,
            "saihm_accept_contract": self._accept,
            "saihm_decline_contract": self._decline,
            "saihm_record": self._record,
            "saihm_forget_session": self._forget_session,
        }

    @property
    def methods(self) -> tuple[str, ...]:
        """Every method name the binding accepts."""
        return tuple(self._tools)

    def call(self, token: str | None, method: object, params: object) -> Any:
        """Run one binding call: ``{"method", "params"}`` with a bearer capability.

        Raises a :class:`SaihmError` whose ``code`` is the protocol error code.
        """
        if not isinstance(method, str) or method not in self._tools:
            raise NotFound("unknown method", code="unknown_method")
        if method.startswith("saihm_governance") and not self.config.governance:
            raise Disabled("governance is not enabled", code="governance_disabled")
        access = self.store.authenticate(token)
        if access.consumer is not None:
            raise NotPermitted("a consumer grant reads through the provider API only")
        return self._tools[method](access, params if params is not None else {})

    # -- saihm_remember and saihm_record --------------------------------------------------

    def _remember(self, access: Access, params: object) -> dict:
        p = P.check_params(params, {"content", "namespace"}, {"content"})
        content = P.text(p, "content")
        namespace = P.text(p, "namespace", default="memory")
        if not content.strip():
            raise MalformedInput("content is empty", code="empty_content")
        return self.remember(access, content, namespace=namespace)

    def remember(self, access: Access, content: str, *, namespace: str = "memory") -> dict:
        """Seal ``content`` into a new cell of the caller's session and log REMEMBER."""
        self._check_writable(access, namespace)
        payload = SealedPayload(
            content=content, session_id=access.session_id, namespace=namespace, kind="memory"
        )
        change, cell = self._cell_change(access, payload, None)
        self._commit(change)
        return self._cell_result(cell, change)

    def _check_writable(self, access: Access, namespace: str) -> None:
        if not namespace or len(namespace) > 256:
            raise MalformedInput("namespace must be 1 to 256 characters")
        if access.session_id is None:
            raise MalformedInput("this token names no session to write into", code="no_session")
        if access.namespaces is not None and namespace not in access.namespaces:
            raise NotPermitted("namespace outside the token's scope", code="not_holder")

    def _cell_change(
        self, access: Access, payload: SealedPayload, record: tuple[int, bool] | None,
        guard: Callable | None = None,
    ) -> tuple[Change, Any]:  # fmt: skip
        key = self._key(access)
        now = self._now()
        cell, dek = seal(
            payload, key=key, kek_version=self.store.kek_dir.current_version,
            tier=self.config.tier, timestamp=now,
        )  # fmt: skip
        receipt = sign_receipt(
            key, subject_id=cell.cell_id, operation=Operation.REMEMBER, timestamp=now
        )
        cell_bytes = cell.to_cbor()
        body = Body(
            cell_bytes,
            self.store.session_tag(access.holder_id, access.session_id),
            None if record is None else record[0],
            False if record is None else record[1],
        )
        change = Change(
            receipts=[receipt], bodies={cell.cell_id: body}, deks=[(cell.cell_id, dek)],
            memo=[(cell.cell_id, cell_bytes)], guard=guard,
        )  # fmt: skip
        return change, cell

    @staticmethod
    def _cell_result(cell: Any, change: Change) -> dict:
        return {
            "cellId": P.hx(cell.cell_id),
            "cellNonce": P.hx(cell.cell_nonce),
            "tier": cell.tier,
            "kekVersion": cell.kek_version,
            "epoch": P.dec(cell.timestamp),
            "signaturePrefix": P.hx(cell.signature[:16]),
            "receiptId": P.hx(change.receipts[0].receipt_id),
        }

    def _record(self, access: Access, params: object) -> dict:
        p = P.check_params(params, {"content", "kind"}, {"content", "kind"})
        content = P.text(p, "content")
        kind = P.text(p, "kind")
        if kind not in RECORD_KINDS:
            raise MalformedInput("kind must be said, did or end", code="invalid_kind")
        if kind != "end" and not content.strip():
            raise MalformedInput("content is empty", code="empty_content")
        return self.record(access, content, kind)

    def record(self, access: Access, content: str, kind: str) -> dict:
        """Append a record cell to the caller's session chain (seq, prev); "end" closes it."""
        self._check_writable(access, "record")
        tag = self.store.session_tag(access.holder_id, access.session_id)
        for _ in range(5):
            with self.store.read_txn() as txn:
                head = self.store.projections.cells.record_head(txn, tag)
            if head is not None and head.ended:
                raise Conflict("this session's record has ended", code="record_ended")
            seq = 0 if head is None else head.seq + 1
            prev = None if head is None else head.cell_id
            payload = SealedPayload(
                content=content, session_id=access.session_id, namespace="record",
                kind=kind, seq=seq, prev=prev,
            )  # fmt: skip

            def guard(txn: Any, expected: RecordHead | None = head) -> None:
                if self.store.projections.cells.record_head(txn, tag) != expected:
                    raise _Retry()

            change, cell = self._cell_change(access, payload, (seq, kind == "end"), guard)
            try:
                self._commit(change)
            except _Retry:
                continue
            result = self._cell_result(cell, change)
            result.update(seq=seq, prev=None if prev is None else P.hx(prev), kind=kind)
            return result
        raise Conflict("the record changed under this call; try again", code="record_conflict")

    # -- saihm_recall ---------------------------------------------------------------------

    def _recall(self, access: Access, params: object) -> list:
        p = P.check_params(params, RECALL_PARAMS)
        query = P.text(p, "query", default="")
        window = RecallWindow.parse(p, queried=bool((query or "").split()))
        return self.recall(access, query, window)

    def recall(
        self, access: Access, query: str | None, window: RecallWindow | None = None
    ) -> RecallAnswer:
        """The caller's cells in scope and the covered cells of active contracts that match
        ``query``, most relevant first (all cells in log order for an empty query), within
        ``window`` (docs/retrieval.md "Extension params").

        Elements carry the protocol's fields and the extensions ``kind``, ``namespace``,
        ``sessionId`` and, for a query, ``score``. The query is never logged and never
        written to the RECALL receipt.
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
        render = self._recall_item
        answer = RecallAnswer(c.memo.get("recall") or render(c) for c in page.cells)
        if page.scores is not None:
            scored = zip(answer, page.scores, strict=True)
            answer[:] = [{**item, "score": round(score, 6)} for item, score in scored]
        cut = page.more
        if window.max_bytes is not None and answer:
            used, kept = 2 + item_bytes(answer[0]), 1
            while kept < len(answer) and used + item_bytes(answer[kept]) <= window.max_bytes:
                used += item_bytes(answer[kept])
                kept += 1
            if kept < len(answer):
                del answer[kept:]
                cut = True
        if cut and answer:
            answer.cut = True
            answer.next_cursor = encode_cursor(page.resume(len(answer) - 1), queried=queried)
        if self.config.recall_receipts:
            self.log_receipt(access, Operation.RECALL)
        return answer

    @staticmethod
    def _recall_item(opened: OpenedCell) -> dict:
        """The protocol's recall element for a verified cell, memoised with it (the cell and
        its label cannot change; only whether this caller may see it, checked per call)."""
        item = opened.memo.get("recall")
        if item is not None:
            return item
        cell, payload = opened.cell, opened.payload
        item = RecallItem(
            cellId=P.hx(cell.cell_id),
            plaintext=payload.content,
            holderIdHex=P.hx(cell.holder_id),
            cellNonce=P.hx(cell.cell_nonce),
            kekVersion=cell.kek_version,
            holderSignaturePrefix=P.hx(cell.signature_prefix),
            timestamp=P.dec(cell.timestamp),
            tier=cell.tier,
            kind=payload.kind,
            namespace=payload.namespace,
            sessionId=P.hx(payload.session_id),
        )
        opened.memo["recall"] = item
        return item

    # -- saihm_forget and saihm_forget_session --------------------------------------------

    def _forget(self, access: Access, params: object) -> dict:
        p = P.check_params(params, {"id"}, {"id"})
        return self.forget(access, P.id32(p.get("id"), what="id"))

    def forget(self, access: Access, cell_id: bytes) -> dict:
        """Erase one cell: withdraw it, destroy its wrapped DEK, log FORGET (one transaction)."""
        with self.store.read_txn() as txn:
            record = self.store.projections.cells.get(txn, cell_id)
        if record is None:
            return {"success": False}
        if record.owner != access.holder_id:
            raise NotPermitted("the caller does not hold this cell", code="not_holder")
        if record.erased:
            return {"success": False}
        if not self.store.read(access, cell_ids=[cell_id], include_shared=False):
            raise NotPermitted("the cell is outside this token's scope", code="not_holder")
        receipt = sign_receipt(
            self._key(access), subject_id=cell_id, operation=Operation.FORGET,
            timestamp=self._now(),
        )  # fmt: skip
        change = self._commit(
            Change(receipts=[receipt], destroy=[cell_id], guard=self._unerased_guard([cell_id]))
        )
        if change.outcome is not None:
            return change.outcome
        return {
            "success": True,
            "cellId": P.hx(cell_id),
            "destructionAnchor": P.hx(receipt.receipt_id),
            "epoch": P.dec(receipt.timestamp),
        }

    def _unerased_guard(self, cell_ids: list[bytes]) -> Callable[[Any], object]:
        def guard(txn: Any) -> object:
            for cell_id in cell_ids:
                if self.store.projections.cells.is_erased(txn, cell_id):
                    return {"success": False}
            return None

        return guard

    def _forget_session(self, access: Access, params: object) -> dict:
        p = P.check_params(params, {"sessionId"}, {"sessionId"})
        return self.forget_session(access, P.id32(p.get("sessionId"), what="sessionId"))

    def forget_session(self, access: Access, session_id: bytes) -> dict:
        """Erase every cell (memory and record) of one session; every receipt stays."""
        if not access.all_sessions and session_id != access.session_id:
            raise NotPermitted("the session is outside this token's scope", code="not_holder")
        cells = [
            c for c in self.store.read(access, include_shared=False)
            if c.payload.session_id == session_id
        ]  # fmt: skip
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
                raise Conflict("a cell was erased concurrently; repeat the call", code="retry")
        return {
            "sessionId": P.hx(session_id),
            "erased": len(ids),
            "cellIds": [P.hx(i) for i in ids],
            "receiptIds": [P.hx(r.receipt_id) for r in receipts],
        }

    # -- saihm_status ---------------------------------------------------------------------

    def _status(self, access: Access, params: object) -> dict:
        P.check_params(params, set())
        return self.status(access)

    def status(self, access: Access) -> dict:
        """The caller's identity, reliability, receipt count, shards, contracts, governance."""
        now = self._now()
        start = now - WINDOW_30_DAYS
        holder = access.holder_id
        shards: dict[str, int] = {}
        contracts, incoming, governance = [], [], []
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
                        {
                            "contractId": P.hx(contract_id),
                            "mode": c.mode,
                            "granteeIds": [P.hx(g) for g in c.grantees],
                            "expiresAt": P.dec(c.expires_at),
                        }
                    )
            for contract_id, c in records.contracts.of_grantee(txn, holder):
                if not c.revoked and holder in c.grantees:
                    incoming.append(
                        {
                            "contractId": P.hx(contract_id),
                            "holderIdHex": P.hx(c.holder),
                            "mode": c.mode,
                            "accepted": holder in c.accepted,
                            "expiresAt": P.dec(c.expires_at),
                        }
                    )
            for ts in records.receipts.timestamps_of_holder(txn, holder):
                receipts_in_window += ts >= start
            if self.config.governance:
                governance = self._proposals(txn)
        result: dict[str, Any] = {
            "agentIdHashHex": P.hx(holder),
            "custody": "custodial",
            "bfsi_window_start_ts": P.dec(start),
            "bfsi_R": P.dec(receipts_in_window),
            "shards": shards,
            "contracts": contracts,
            "incomingContracts": incoming,
            "governance": governance,
            "sessionId": None if access.session_id is None else P.hx(access.session_id),
        }
        calls, within = self.store.stats_since(start)
        if calls:
            result["prs"] = round(within / calls, 6)
        if self.config.status_receipts:
            self.log_receipt(access, Operation.STATUS)
        return result

    # -- the person's actions (command line) ----------------------------------------------

    def create_holder(self) -> bytes:
        """Generate a holder seed and key, store the wrapped seed, log the KEY receipt."""
        seed = os.urandom(32)
        key = HolderKey.from_seed(seed)
        receipt = sign_receipt(
            key, subject_id=key.holder_id, operation=Operation.KEY, timestamp=self._now(),
            detail=key.public_key,
        )  # fmt: skip
        self._commit(Change(receipts=[receipt], seeds=[(key.holder_id, seed)]))
        return key.holder_id

    def grant(
        self, holder_id: bytes, namespaces: list[str] | None, expires_at: int
    ) -> tuple[bytes, bytes]:
        """Log a person's holder-wide grant (GRANT); return (grantId, receiptId)."""
        with self.store.read_txn() as txn:
            if not self.store.projections.holders.known(txn, holder_id):
                raise NotFound("no such holder", code="holder_not_found")
        grant_id = secrets.token_bytes(32)
        detail = GrantDetail(
            namespaces=None if namespaces is None else tuple(namespaces), expires_at=expires_at
        )
        receipt = sign_receipt(
            self.store.holder_key(holder_id), subject_id=grant_id, operation=Operation.GRANT,
            timestamp=self._now(), detail=detail,
        )  # fmt: skip
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
                raise NotFound("no such holder", code="holder_not_found")
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
            raise NotFound("no such grant", code="grant_not_found")
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


__all__ = ["Operator"]
