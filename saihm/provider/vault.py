"""``local-vault``: the reference Memory Provider of RFC 0007 over the SAIHM store.

Namespaces are the sealed namespace label of cells; records are cells of one vault holder
(see :mod:`saihm.provider.records`). Every consumer call authenticates its capability with
:meth:`Store.authenticate` (signature, expiry, and the grant's GRANT-without-UNGRANT state, so
revocation takes effect on the next call) and reads only through :meth:`Store.read`, the checked
read path (requirements.txt: "Everything that reads the store passes that filter"). Request
fields can only narrow what the capability allows; a namespace outside the grant is refused
(RFC "Phase C notes"). Every read is logged as a RECALL receipt whose subject is the holder.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Literal, cast

from saihm.authority import Authority, check_token_fits
from saihm.errors import Conflict, MalformedInput, NotFound, NotPermitted
from saihm.events import CapabilityScope, Operation
from saihm.operator import Forgotten, Operator
from saihm.provider import graph as graph_index
from saihm.provider.meta import VaultMeta
from saihm.provider.models import (
    PROVIDER_ID,
    PROVIDER_VERSION,
    ConsumerGrant,
    GraphExcerpt,
    GraphQuery,
    MemoryExcerpt,
    MemoryGrantField,
    MemoryProviderStatus,
    MemoryQuery,
    MemoryRecord,
    MemoryRecordRef,
    MemoryStore,
    Mode,
    PendingProposal,
    iso8601,
)
from saihm.provider.pending import PendingProposals
from saihm.provider.records import ranked, record_size, seal_text, to_record
from saihm.store import Access

READ_MODES = ("read", "readwrite")
WRITE_MODES = ("write", "readwrite")
#: Default lifetime of a consumer grant (30 days).
GRANT_TTL = 30 * 86_400


class LocalVault:
    """The vault of one data directory: the person's actions plus consumer-bound providers."""

    id = PROVIDER_ID
    version = PROVIDER_VERSION

    def __init__(
        self, operator: Operator, meta: VaultMeta, authority: Authority | None = None
    ) -> None:
        self.operator = operator
        self.cells = operator.store
        self.meta = meta
        self.authority = authority
        self.proposals = PendingProposals(operator, meta)

    # -- setting up -------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        """The data directory the vault belongs to."""
        return self.operator.config.data_dir

    @classmethod
    def init(
        cls, operator: Operator, authority: Authority | None, holder_id: bytes | None = None
    ) -> tuple[LocalVault, bool]:
        """Set the vault up for ``operator``'s data directory; (vault, created).

        Creates a vault holder (KEY receipt) unless ``holder_id`` names an existing one. A
        second init returns the existing vault unchanged; with a different ``holder_id`` it is
        refused (``Conflict``).
        """
        data = operator.config.data_dir
        if VaultMeta.path(data).exists():
            meta = VaultMeta.load(data)
            if holder_id is not None and holder_id != meta.holder_id:
                raise Conflict("this data directory already has a vault for another holder")
            return cls(operator, meta, authority), False
        if holder_id is None:
            holder_id = operator.admin.create_holder()
        else:
            if not operator.store.holder_known(holder_id):
                raise NotFound("no such holder", code="holder_not_found")
        meta = VaultMeta(holder_id=holder_id, session_id=secrets.token_bytes(32))
        meta.save(data)
        return cls(operator, meta, authority), True

    @classmethod
    def open(cls, operator: Operator, authority: Authority | None = None) -> LocalVault:
        """The vault of ``operator``'s data directory (``NotFound`` before init)."""
        return cls(operator, VaultMeta.load(operator.config.data_dir), authority)

    def for_consumer(self, token: str) -> ConsumerProvider:
        """A :class:`MemoryProvider` bound to one consumer's capability token."""
        return ConsumerProvider(self, token)

    def _now(self) -> int:
        return int(self.cells.clock())

    def _authority(self) -> Authority:
        if self.authority is None:
            raise MalformedInput("this action needs the authority (--authority-dir)")
        return self.authority

    # -- grants (RFC "Permission model extension") ------------------------------------------

    def grant(
        self,
        consumer: str,
        namespaces: list[str] | tuple[str, ...],
        mode: Mode | None,
        sections: tuple[str, ...] = (),
        ttl: int = GRANT_TTL,
    ) -> tuple[ConsumerGrant, str | None]:
        """Grant ``consumer`` memory access; returns (the RFC grant, the consumer's token).

        Logs GRANT and issues a capability scoped to ``consumer``, ``mode``, ``namespaces`` and
        every session of the vault holder, naming the grant so UNGRANT revokes it. ``mode``
        None means no memory access (no token). An earlier grant of the consumer is withdrawn
        first (UNGRANT), so each consumer has at most one live grant.
        """
        field = MemoryGrantField(namespaces=tuple(namespaces), mode=mode)
        result = ConsumerGrant(provider=consumer, sections=tuple(sections), memory=field)
        if mode is not None and not namespaces:
            raise MalformedInput("a memory grant names at least one namespace")
        if ttl <= 0:
            raise MalformedInput("a grant's lifetime must be positive")
        expires_at = self._now() + ttl
        authority = self._authority() if mode is not None else None
        if mode is not None:
            # Refuse a token no server could read before anything changes: before the earlier
            # grant is withdrawn and before GRANT is logged (saihm.authority).
            draft = CapabilityScope(
                sessions="all",
                namespaces=tuple(namespaces),
                grant_id=bytes(32),
                consumer=consumer,
                mode=mode,
            )
            check_token_fits(self.meta.holder_id, bytes(32), draft, expires_at)
        self.revoke(consumer, missing_ok=True)
        entry: dict = {"sections": list(sections), "mode": mode, "namespaces": list(namespaces)}
        token = None
        if authority is not None and mode is not None:
            grant_id, _ = self.operator.admin.grant(
                self.meta.holder_id, list(namespaces), expires_at
            )
            scope = CapabilityScope(
                sessions="all",
                namespaces=tuple(namespaces),
                grant_id=grant_id,
                consumer=consumer,
                mode=mode,
            )
            session_id = authority.session_id(self.meta.holder_id)
            cap = authority.issue(self.meta.holder_id, session_id, scope, ttl, now=self._now())
            token = cap.to_token()
            entry.update(grantId=grant_id.hex(), expiresAt=expires_at)
        self.meta.consumers[consumer] = entry
        self.meta.save(self.data_dir)
        return result, token

    def revoke(self, consumer: str, *, missing_ok: bool = False) -> dict:
        """Withdraw ``consumer``'s grant (UNGRANT) and reject its pending proposals.

        Takes effect on the consumer's next call: the store refuses a token whose grant has an
        UNGRANT receipt.
        """
        entry = self.meta.consumers.get(consumer)
        if entry is None:
            if missing_ok:
                return {"consumer": consumer, "revoked": False}
            raise NotFound("no grant for this consumer", code="grant_not_found")
        changed = False
        if entry.get("grantId"):
            changed = self.operator.admin.ungrant(bytes.fromhex(entry["grantId"]))
        rejected = self.proposals.reject_consumer(consumer)
        del self.meta.consumers[consumer]
        self.meta.save(self.data_dir)
        return {"consumer": consumer, "revoked": True, "changed": changed, "rejected": rejected}

    # -- the person's own store (RFC "store() is user/CLI-initiated") -----------------------

    def store(self, request: MemoryStore) -> MemoryRecordRef:
        """Store a record as the person: sealed into the vault session, logged REMEMBER
        (:meth:`MemoryTools.remember` with the person's Access; no token is minted). With
        ``supersedes`` the named record is forgotten in the same change (its FORGET receipt
        beside the REMEMBER), or nothing is written (``not_found``, ``erased``,
        ``not_holder``)."""
        access = self.proposals.person()
        done = self.operator.memory.remember(
            access,
            seal_text(request),
            namespace=request.namespace,
            supersedes=_record_id(request.supersedes),
        )
        return MemoryRecordRef(
            id=done.cell_id.hex(),
            namespace=request.namespace,
            state="stored",
            created_at=iso8601(done.epoch),
            receipt_id=done.receipt_id.hex(),
        )

    def forget(self, record_id: str) -> dict:
        """Erase one record as the person (RFC 0007 "memory forget"; saihm-protocol "Erasure").

        The record's DEK is destroyed and FORGET is logged in one transaction
        (:meth:`MemoryTools.forget`). Returns ``{"id", "erased", "receiptId"}``; ``erased`` is
        False for a record that is unknown or already erased. Raises ``MalformedInput`` for an
        id that is not 64 hex characters and ``NotPermitted`` for a cell outside the vault's
        session.
        """
        try:
            cell_id = bytes.fromhex(record_id)
        except ValueError as err:
            raise MalformedInput("a record id is 64 hex characters") from err
        if len(cell_id) != 32:
            raise MalformedInput("a record id is 64 hex characters")
        result = self.operator.memory.forget(self.proposals.person(), cell_id)
        if isinstance(result, Forgotten):
            return {"id": record_id, "erased": True, "receiptId": result.destruction_anchor.hex()}
        return {"id": record_id, "erased": False, "receiptId": None}

    # -- pending proposals (the person confirms) --------------------------------------------

    def pending(self, *, show: bool = True) -> list[PendingProposal]:
        """Held proposals; with ``show``, decrypted so the person can decide."""
        return self.proposals.listing(show=show)

    def accept(self, proposal_id: str) -> MemoryRecordRef:
        """Commit a held proposal as a live record (REMEMBER receipt, one transaction)."""
        return self.proposals.accept(proposal_id)

    def reject(self, proposal_id: str) -> bool:
        """Drop a held proposal and destroy its wrapped DEK; False if it was not held."""
        return self.proposals.reject(proposal_id)

    # -- consumer calls ---------------------------------------------------------------------

    def authenticate(self, token: str, consumer: str | None, modes: tuple[str, ...]) -> Access:
        """The checked capability of a consumer call, or an error (401/403)."""
        access = self.cells.authenticate(token)
        if access.consumer is None:
            raise NotPermitted("the provider answers consumer grants only", code="not_consumer")
        if access.holder_id != self.meta.holder_id:
            raise NotPermitted("the grant is for another vault", code="not_holder")
        if consumer is not None and consumer != access.consumer:
            raise NotPermitted("consumer does not match the grant", code="consumer_mismatch")
        if access.mode not in modes:
            raise NotPermitted("the grant's mode does not allow this call", code="mode_not_granted")
        return access

    def sections(self, access: Access) -> tuple[str, ...]:
        """The passport sections recorded with the grant ``access`` was issued under.

        Read from the vault metadata only when its entry names the same grant id, so a
        re-granted or revoked consumer's earlier sections are never reported.
        """
        entry = self.meta.consumers.get(access.consumer or "")
        if entry is None or access.grant_id is None:
            return ()
        if entry.get("grantId") != access.grant_id.hex():
            return ()
        return tuple(str(s) for s in entry.get("sections") or ())

    @staticmethod
    def scope(access: Access, requested: tuple[str, ...]) -> frozenset[str] | None:
        """Requested namespaces narrowed to the grant; outside the grant is refused."""
        if access.namespaces is None:
            return frozenset(requested) or None
        if not set(requested) <= access.namespaces:
            raise NotPermitted(
                "a requested namespace is outside the grant", code="namespace_not_granted"
            )
        return frozenset(requested) or access.namespaces

    def visible(
        self, access: Access, namespaces: frozenset[str] | None, text: str | None
    ) -> list[MemoryRecord]:
        """Records ``access`` may see in ``namespaces``: newest first, or for a ``text``
        most relevant first; logs RECALL.

        Visibility is :meth:`Store.read`'s per-item check; ``namespaces`` only narrows it.
        ``text`` is matched and ranked as ``saihm_recall`` ranks (:func:`records.ranked`: the
        same retrieval code, over everything visible, narrowed after) against each record's
        content values, not the sealed JSON, so a field name or the vault's marker matches
        nothing.
        """
        opened = self.cells.read(access, include_shared=False)
        self.operator.context.log_receipt(access, Operation.RECALL)
        opened = sorted(opened, key=lambda c: c.index, reverse=True)
        records = [to_record(c) for c in opened]
        order = (
            range(len(records)) if not (text or "").split() else ranked(opened, records, text or "")
        )
        return [
            records[i]
            for i in order
            if namespaces is None or opened[i].payload.namespace in namespaces
        ]


class ConsumerProvider:
    """``local-vault`` bound to one consumer's capability: the RFC's ``MemoryProvider``.

    The token is re-authenticated on every call, so expiry and revocation apply at once.
    """

    id = PROVIDER_ID
    version = PROVIDER_VERSION

    def __init__(self, vault: LocalVault, token: str) -> None:
        self._vault = vault
        self._token = token

    def __repr__(self) -> str:
        return "ConsumerProvider(local-vault)"

    def status(self) -> MemoryProviderStatus:
        """Health and what this grant may do."""
        access = self._vault.authenticate(self._token, None, (*READ_MODES, "write"))
        caps: list[Literal["query", "store", "graph"]] = (
            ["query", "graph"] if access.mode in READ_MODES else []
        )
        if access.mode in WRITE_MODES:
            caps.append("store")
        return MemoryProviderStatus(
            id=self.id,
            version=self.version,
            healthy=True,
            capabilities=tuple(caps),
            consumer=access.consumer,
            mode=cast(Mode | None, access.mode),  # authenticate() admitted only these modes
            namespaces=None if access.namespaces is None else tuple(sorted(access.namespaces)),
            sections=self._vault.sections(access),
        )

    def query(self, request: MemoryQuery) -> MemoryExcerpt:
        """A filtered excerpt: at most ``limit`` records and ``max_bytes`` bytes, newest first."""
        access = self._vault.authenticate(self._token, request.consumer, READ_MODES)
        namespaces = LocalVault.scope(access, request.namespaces)
        records: list[MemoryRecord] = []
        used = 0
        truncated = False
        for record in self._vault.visible(access, namespaces, request.text):
            size = record_size(record)
            if len(records) == request.limit or (
                request.max_bytes is not None and used + size > request.max_bytes
            ):
                truncated = True
                break
            records.append(record)
            used += size
        return MemoryExcerpt(records=tuple(records), truncated=truncated)

    def store(self, request: MemoryStore) -> MemoryRecordRef:
        """Propose a record: held as pending until the person accepts it (never silent)."""
        access = self._vault.authenticate(self._token, request.consumer, WRITE_MODES)
        LocalVault.scope(access, (request.namespace,))
        return self._vault.proposals.propose(access, request)

    def graph(self, request: GraphQuery) -> GraphExcerpt:
        """Entities and relations of the records this grant can see (built per call)."""
        access = self._vault.authenticate(self._token, request.consumer, READ_MODES)
        namespaces = LocalVault.scope(access, request.namespaces)
        records = self._vault.visible(access, namespaces, None)
        return graph_index.build(
            records, start=request.entity, depth=request.depth, limit=request.limit
        )


def _record_id(value: str | None) -> bytes | None:
    """A record id (64 lowercase hex digits, checked by :class:`MemoryStore`) as a cellId."""
    return None if value is None else bytes.fromhex(value)
