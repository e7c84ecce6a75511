"""Consumer write proposals held for the person (RFC 0007: "never silent agent write").

A proposal is sealed and signed at once (the plaintext never rests on disk); its cell bytes and
wrapped DEK are held in the store's ``provider-pending`` namespace (saihm/store/held.py)
and its content is opened only through the store's checked read path, with the person's
Access. Accepting commits the very same cell with a REMEMBER receipt, in one transaction that
also removes the proposal; rejecting destroys the wrapped DEK, so the held ciphertext can no
longer be read. A proposal's id is its prepared cell's id, so the record an accepted proposal
becomes has the id the consumer was given when it proposed.

Bounds (Build 6, docs/operations.md): a consumer holds at most ``Config.pending_max``
proposals (one more is refused, 409 "pending_full", and changes nothing; the count is taken
inside the write transaction, so racing processes cannot pass it), and a proposal lives
``Config.pending_ttl`` seconds, its expiry written into it when proposed. An expired proposal
is neither listed nor acceptable; its wrapped DEK is destroyed at the next propose, listing,
accept or :meth:`PendingProposals.sweep`.

:class:`PendingProposals` is the provider's part for them: it is given the operator and the
vault's metadata (it does not import the vault, which owns one).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from saihm.errors import Conflict, ErrorCode, MalformedInput, NotFound
from saihm.events import SealedPayload
from saihm.events.envelope import seal
from saihm.operator import Operator
from saihm.provider.meta import VaultMeta
from saihm.provider.models import MemoryRecordRef, MemoryStore, PendingProposal, iso8601
from saihm.provider.records import parse_sealed, seal_text
from saihm.store import Access

__all__ = ["PERSON_ACCESS_TTL", "HoldsProposals", "PendingProposals", "sweep"]

#: Lifetime of the in-process Access the person acts with (saihm memory store, accept, ...).
PERSON_ACCESS_TTL = 300


def _id(value: str) -> bytes:
    try:
        raw = bytes.fromhex(value)
    except (ValueError, TypeError) as err:
        raise MalformedInput("a proposal id is 64 hex characters") from err
    if len(raw) != 32:
        raise MalformedInput("a proposal id is 64 hex characters")
    return raw


def _expires_at(meta: dict[str, Any], ttl: int) -> int:
    """When a proposal expires: its own ``expiresAt``, else (held before expiry was recorded)
    ``proposedAt`` plus the configured lifetime."""
    value = meta.get("expiresAt")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(meta.get("proposedAt", 0)) + ttl


def _meta(raw: bytes) -> dict[str, Any]:
    try:
        meta = json.loads(raw)
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def _expired(meta: dict[str, Any], now: int, ttl: int) -> bool:
    return _expires_at(meta, ttl) <= now


class PendingProposals:
    """The consumer write proposals of one vault, held until the person decides."""

    def __init__(self, operator: Operator, meta: VaultMeta) -> None:
        self.operator = operator
        self.cells = operator.store
        self.held = operator.store.held
        self.meta = meta

    def person(self) -> Access:
        """The person's own Access to the vault session (no token is minted)."""
        return self.cells.person_access(
            self.meta.holder_id, self.meta.session_id, PERSON_ACCESS_TTL
        )

    def propose(self, access: Access, request: MemoryStore) -> MemoryRecordRef:
        """Seal ``request`` into a prepared cell of the vault session and hold it.

        Inside the write transaction every expired proposal is dropped (DEK destroyed) and the
        consumer's live proposals are counted: at ``pending_max`` the proposal is refused with
        :class:`Conflict` ("pending_full") and nothing is stored.
        """
        store = self.cells
        config = self.operator.config
        now = int(store.clock())
        supersedes = None if request.supersedes is None else bytes.fromhex(request.supersedes)
        if supersedes is not None:
            # Only a record this grant may see and that is live: checked again on accept.
            self.operator.memory.check_supersedable(access, supersedes)
        payload = SealedPayload(
            content=seal_text(request),
            session_id=self.meta.session_id,
            namespace=request.namespace,
            kind="memory",
            supersedes=supersedes,
        )
        cell, dek = seal(
            payload,
            key=store.holder_key(self.meta.holder_id),
            kek_version=store.kek_version,
            tier=config.tier,
            timestamp=now,
        )
        # The proposal is named by its prepared cell's id, which is the id of the record it
        # becomes when the person accepts it: the consumer holds one id from propose to
        # accept, and forget by that id reaches the record (issue 25 item 6).
        proposal_id = cell.cell_id
        if access.grant_id is None:
            raise MalformedInput("a proposal needs a consumer grant")
        meta = {
            "consumer": access.consumer,
            "grantId": access.grant_id.hex(),
            "proposedAt": now,
            "expiresAt": now + config.pending_ttl,
        }

        def admit(held: list[tuple[bytes, bytes]]) -> list[bytes]:
            expired, mine = [], 0
            for held_id, raw in held:
                entry = _meta(raw)
                if _expired(entry, now, config.pending_ttl):
                    expired.append(held_id)
                elif entry.get("consumer") == access.consumer:
                    mine += 1
            if mine >= config.pending_max:
                raise Conflict(
                    "too many pending proposals for this consumer", code=ErrorCode.PENDING_FULL
                )
            return expired

        self.held.put(proposal_id, cell, dek, json.dumps(meta).encode(), admit=admit)
        return MemoryRecordRef(
            id=proposal_id.hex(),
            namespace=request.namespace,
            state="pending",
            created_at=iso8601(now),
        )

    def sweep(self) -> int:
        """Drop every expired proposal and destroy its wrapped DEK; returns how many."""
        now = int(self.cells.clock())
        ttl = self.operator.config.pending_ttl
        count = 0
        for proposal_id, _cell, raw_meta in self.held.items():
            if _expired(_meta(raw_meta), now, ttl):
                count += self.held.reject(proposal_id)
        return count

    def listing(self, *, show: bool) -> list[PendingProposal]:
        """Every held, unexpired proposal, oldest first; decrypted for the person when ``show``.

        Expired proposals are swept first (DEKs destroyed), so they are never listed.
        """
        self.sweep()
        now = int(self.cells.clock())
        ttl = self.operator.config.pending_ttl
        out = []
        for proposal_id, _cell, raw_meta in self.held.items():
            meta = json.loads(raw_meta)
            if _expired(meta, now, ttl):
                continue
            namespace = record = None
            if show:
                _, _, payload = self.held.open(self.person(), proposal_id)
                namespace = payload.namespace
                record = parse_sealed(payload.content)
            out.append(
                PendingProposal(
                    id=proposal_id.hex(),
                    consumer=meta["consumer"],
                    proposed_at=iso8601(meta["proposedAt"]),
                    namespace=namespace,
                    record=record,
                )
            )
        out.sort(key=lambda p: (p.proposed_at, p.id))
        return out

    def accept(self, proposal_id: str) -> MemoryRecordRef:
        """Make a held proposal a live record: REMEMBER receipt + cell, proposal removed,
        atomically, through :meth:`MemoryTools.remember_sealed` (the path of every remember).

        An expired proposal is not acceptable: it is dropped, its DEK destroyed, and the answer
        is :class:`NotFound` ("proposal_not_found"), as for one never held. A proposal that
        supersedes a record forgets it in the same change; if that record was erased since, the
        answer is :class:`NotFound` ("erased") and the proposal stays held (the person may
        reject it).
        """
        pid = _id(proposal_id)
        store = self.cells
        cell, raw_meta, payload = self.held.open(self.person(), pid)
        if _expired(_meta(raw_meta), int(store.clock()), self.operator.config.pending_ttl):
            self.held.reject(pid)
            raise NotFound("no such pending proposal", code=ErrorCode.PROPOSAL_NOT_FOUND)
        if cell.holder_id != self.meta.holder_id:
            raise NotFound("no such pending proposal", code=ErrorCode.PROPOSAL_NOT_FOUND)
        also = {} if payload.supersedes is None else {"supersedes": payload.supersedes}
        done = self.operator.memory.remember_sealed(
            self.person(), cell, payload.session_id, guard=self.held.take_guard(pid), **also
        )
        return MemoryRecordRef(
            id=done.cell_id.hex(),
            namespace=payload.namespace,
            state="stored",
            created_at=iso8601(cell.timestamp),
            receipt_id=done.receipt_id.hex(),
        )

    def reject(self, proposal_id: str) -> bool:
        """Drop a held proposal and destroy its wrapped DEK."""
        return self.held.reject(_id(proposal_id))

    def reject_consumer(self, consumer: str) -> int:
        """Reject every proposal of ``consumer`` (on revocation); returns how many."""
        count = 0
        for proposal_id, _cell, raw_meta in self.held.items():
            if json.loads(raw_meta).get("consumer") == consumer:
                count += self.held.reject(proposal_id)
        return count


class HoldsProposals(Protocol):
    """Anything that owns a :class:`PendingProposals` (the vault)."""

    @property
    def proposals(self) -> PendingProposals: ...


def sweep(vault: HoldsProposals) -> int:
    """Drop every expired proposal of ``vault`` and destroy its wrapped DEK; how many."""
    return vault.proposals.sweep()
