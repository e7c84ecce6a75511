"""The protocol's JSON forms of the operations' typed results (each tool's "Result").

Renderers take the typed results of :mod:`saihm.operator` (bytes ids, ints) and give the
protocol's JSON values: ids as lowercase hex, numbers that can exceed 2^53 - 1 as decimal
strings. A recall's elements are rendered once per verified cell and kept in
:class:`RecallItems`, the edge's rendering cache keyed by cell id.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from saihm.operator import (
    AlreadyErased,
    Forgotten,
    ForgottenSession,
    ProposalSummary,
    Proposed,
    Recalled,
    Recorded,
    Remembered,
    Responded,
    Revoked,
    Shared,
    Status,
    Voted,
)
from saihm.protocol.params import dec, hx
from saihm.protocol.window import encode_cursor

if TYPE_CHECKING:
    from saihm.store import OpenedCell, Page

__all__ = [
    "MAX_RECALL_ITEMS",
    "RecallAnswer",
    "RecallItem",
    "RecallItems",
    "item_bytes",
    "recall_item",
    "render_forgotten",
    "render_forgotten_session",
    "render_proposed",
    "render_recalled",
    "render_remembered",
    "render_responded",
    "render_revoked",
    "render_shared",
    "render_status",
    "render_voted",
]

#: The most recall elements one :class:`RecallItems` keeps. An element lives only as long as
#: the verified cell it was rendered from, so the store's cache bounds them first; this is the
#: bound of last resort.
MAX_RECALL_ITEMS = 1_000_000


class RecallItem(dict[str, Any]):
    """One recall element that cannot be changed: the binding hands out the same object to
    every caller that may see the cell (it is kept in :class:`RecallItems`), so a caller that
    tried to edit it would edit everyone's answer. Copy it (``dict(item)``) to edit."""

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a recall item is read-only; copy it with dict(item)")

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        return (dict, (dict(self),))


class RecallAnswer(list[Mapping[str, Any]]):
    """A recall's JSON array, with the binding's extension metadata beside it: ``cut`` (items
    remain beyond this answer) and ``next_cursor`` (pass it as ``cursor`` to continue)."""

    cut: bool = False
    next_cursor: str | None = None


def item_bytes(item: Mapping[str, Any]) -> int:
    """The UTF-8 size of one element as the binding sends it, with its separating comma."""
    return len(json.dumps(item, separators=(",", ":")).encode("utf-8")) + 1


def recall_item(opened: OpenedCell) -> RecallItem:
    """The protocol's recall element for a verified cell (saihm_recall "Result"), with the
    extensions ``kind``, ``namespace`` and ``sessionId``, and, when the cell has them,
    ``supersedes`` (the cellId of the cell it replaced: ``saihm_remember``'s ``supersedes``)
    and ``metadata`` (the writer's structure kept beside ``plaintext``, a JSON object)."""
    cell, payload = opened.cell, opened.payload
    extra: dict[str, Any] = {}
    if payload.supersedes is not None:
        extra["supersedes"] = hx(payload.supersedes)
    if payload.metadata is not None:
        extra["metadata"] = json.loads(payload.metadata)
    return RecallItem(
        cellId=hx(cell.cell_id),
        plaintext=payload.content,
        holderIdHex=hx(cell.holder_id),
        cellNonce=hx(cell.cell_nonce),
        kekVersion=cell.kek_version,
        holderSignaturePrefix=hx(cell.signature_prefix),
        timestamp=dec(cell.timestamp),
        tier=cell.tier,
        kind=payload.kind,
        namespace=payload.namespace,
        sessionId=hx(payload.session_id),
        **extra,
    )


@dataclass(frozen=True, slots=True)
class _Rendered:
    source: weakref.ref[OpenedCell]
    item: RecallItem


class RecallItems:
    """The edge's rendering cache: the recall element of a verified cell, keyed by cell id.

    It is asked only about a cell the store's read path has just returned to this caller (the
    item-by-item check already passed), so it never decides who may see a cell. An element is
    served again only for the very verified cell it was rendered from (the same header and
    payload objects the store's cache holds), and is dropped when that cell leaves the store's
    cache: an erased cell's rendering goes with it, and a cell id read again after erasure or
    eviction is rendered afresh. At most ``bound`` elements are kept (oldest dropped first).

    A page that is a holder's whole kept visible list (``Page.generation`` set) is rendered
    once per generation of that list: the elements are kept, weakly keyed to the generation,
    until the list changes (any cell kept, replaced or let go, as by an erasure or an
    eviction, gives it a new generation and the old one is dropped with its elements).
    """

    def __init__(self, bound: int = MAX_RECALL_ITEMS) -> None:
        if bound < 1:
            raise ValueError("a rendering cache holds at least one element")
        self.bound = bound
        self._entries: dict[bytes, _Rendered] = {}
        self._wholes: weakref.WeakKeyDictionary[object, tuple[RecallItem, ...]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, cell_id: object) -> bool:
        return cell_id in self._entries

    def item(self, opened: OpenedCell) -> RecallItem:
        """The recall element of ``opened``, rendered once while its verified cell lives."""
        cell_id = opened.cell.cell_id
        entry = self._entries.get(cell_id)
        if entry is not None:
            source = entry.source()
            # The store's shared view of a cell is another OpenedCell over the same header
            # and payload; the element does not depend on it.
            if source is not None and (
                source is opened
                or (source.cell is opened.cell and source.payload is opened.payload)
            ):
                return entry.item
        item = recall_item(opened)
        self._keep(cell_id, opened, item)
        return item

    def items(self, cells: Iterable[OpenedCell]) -> list[RecallItem]:
        """:meth:`item` of each of ``cells``, in order, in one loop (an answer may hold
        thousands of elements, most already rendered)."""
        entries = self._entries
        out: list[RecallItem] = []
        append = out.append
        for opened in cells:
            entry = entries.get(opened.cell.cell_id)
            if entry is not None:
                source = entry.source()
                if source is opened or (
                    source is not None
                    and source.cell is opened.cell
                    and source.payload is opened.payload
                ):
                    append(entry.item)
                    continue
            append(self.item(opened))
        return out

    def page_items(self, page: Page) -> Sequence[RecallItem]:
        """:meth:`items` of ``page.cells``; for a whole kept visible list, rendered once per
        generation of that list (the same cells, the same objects, the same elements)."""
        generation = page.generation
        if generation is None:
            return self.items(page.cells)
        kept = self._wholes.get(generation)
        if kept is not None and len(kept) == len(page.cells):
            return kept
        rendered = tuple(self.items(page.cells))
        with self._lock:
            self._wholes[generation] = rendered
        return rendered

    def _keep(self, cell_id: bytes, opened: OpenedCell, item: RecallItem) -> None:
        entries = self._entries

        def gone(ref: weakref.ref[OpenedCell]) -> None:
            # The verified cell left the store's cache: its rendering goes too (unless a
            # newer one has replaced it, which lives by its own cell).
            current = entries.get(cell_id)
            if current is not None and current.source is ref:
                entries.pop(cell_id, None)

        rendered = _Rendered(weakref.ref(opened, gone), item)
        with self._lock:
            while cell_id not in entries and len(entries) >= self.bound:
                try:
                    oldest = next(iter(entries))
                except (StopIteration, RuntimeError):
                    # Emptied or changed under the iterator by a callback above: retry.
                    continue
                entries.pop(oldest, None)
            entries[cell_id] = rendered


def render_remembered(r: Remembered) -> dict[str, object]:
    """saihm_remember "Result"; a :class:`Recorded` adds ``seq``, ``prev`` and ``kind``."""
    out: dict[str, object] = {
        "cellId": hx(r.cell_id),
        "cellNonce": hx(r.cell_nonce),
        "tier": r.tier,
        "kekVersion": r.kek_version,
        "epoch": dec(r.epoch),
        "signaturePrefix": hx(r.signature_prefix),
        "receiptId": hx(r.receipt_id),
    }
    if isinstance(r, Recorded):
        out.update(seq=r.seq, prev=None if r.prev is None else hx(r.prev), kind=r.kind)
    return out


def render_recalled(r: Recalled, items: RecallItems | None = None) -> RecallAnswer:
    """saihm_recall "Result" (an array), cut to ``maxBytes`` of JSON and carrying where to go
    on (docs/retrieval.md "Extension params"). Elements carry the protocol's fields and the
    extensions ``kind``, ``namespace``, ``sessionId`` and, for a query, ``score``; they come
    from ``items`` (rendered afresh without it)."""
    page, window = r.page, r.window
    cells = page.cells
    answer = RecallAnswer(map(recall_item, cells) if items is None else items.page_items(page))
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
        answer.next_cursor = encode_cursor(page.resume(len(answer) - 1), queried=r.queried)
    return answer


def render_forgotten(r: Forgotten | AlreadyErased) -> dict[str, object]:
    """saihm_forget "Result": ``success`` false for a cell that is not live."""
    if isinstance(r, AlreadyErased):
        return {"success": False}
    return {
        "success": True,
        "cellId": hx(r.cell_id),
        "destructionAnchor": hx(r.destruction_anchor),
        "epoch": dec(r.epoch),
    }


def render_forgotten_session(r: ForgottenSession) -> dict[str, object]:
    """saihm_forget_session: the session, how many cells, their ids and receipts."""
    return {
        "sessionId": hx(r.session_id),
        "erased": len(r.cell_ids),
        "cellIds": [hx(i) for i in r.cell_ids],
        "receiptIds": [hx(i) for i in r.receipt_ids],
    }


def _proposal(p: ProposalSummary) -> dict[str, object]:
    return {
        "propId": hx(p.proposal_id),
        "scope": p.scope,
        "paramKey": p.param_key,
        "proposedValue": p.proposed_value,
        "opens_ts": dec(p.opens),
        "closes_ts": dec(p.closes),
        "tally_for": dec(p.tally_for),
        "tally_against": dec(p.tally_against),
        "tally_abstain": dec(p.tally_abstain),
    }


def render_status(r: Status) -> dict[str, object]:
    """saihm_status "Result" with the extensions ``incomingContracts``, ``sessionId`` and the
    caller's token's ``tokenExpiresAt`` (decimal UNIX seconds) and ``tokenSessions``
    ("one" or "all")."""
    out: dict[str, object] = {
        "agentIdHashHex": hx(r.holder_id),
        "custody": "custodial",
        "bfsi_window_start_ts": dec(r.window_start),
        "bfsi_R": dec(r.receipts_in_window),
        "shards": r.shards,
        "contracts": [
            {
                "contractId": hx(c.contract_id),
                "mode": c.mode,
                "granteeIds": [hx(g) for g in c.grantee_ids],
                "expiresAt": dec(c.expires_at),
            }
            for c in r.contracts
        ],
        "incomingContracts": [
            {
                "contractId": hx(c.contract_id),
                "holderIdHex": hx(c.holder_id),
                "mode": c.mode,
                "accepted": c.accepted,
                "expiresAt": dec(c.expires_at),
            }
            for c in r.incoming
        ],
        "governance": [_proposal(p) for p in r.governance],
        "sessionId": None if r.session_id is None else hx(r.session_id),
    }
    if r.prs is not None:
        out["prs"] = r.prs
    if r.token_expires_at is not None:
        out["tokenExpiresAt"] = dec(r.token_expires_at)
        out["tokenSessions"] = r.token_sessions
    return out


def render_shared(r: Shared) -> dict[str, object]:
    """saihm_share "Result"."""
    return {
        "contractId": hx(r.contract_id),
        "type": r.mode.lower(),
        "granteeCount": r.grantee_count,
        "epoch": dec(r.epoch),
        "expiresAt": dec(r.expires_at),
        "receiptId": hx(r.receipt_id),
    }


def render_revoked(r: Revoked) -> dict[str, object]:
    """saihm_revoke_share "Result"; a repeat carries no ``receiptId``."""
    out: dict[str, object] = {"revoked": True, "epoch": dec(r.epoch)}
    if r.receipt_id is not None:
        out["receiptId"] = hx(r.receipt_id)
    return out


def render_responded(r: Responded) -> dict[str, object]:
    """saihm_accept_contract / saihm_decline_contract; a repeat carries no ``receiptId``."""
    out: dict[str, object] = {"contractId": hx(r.contract_id), "accepted": r.accepted}
    if r.receipt_id is not None:
        out["receiptId"] = hx(r.receipt_id)
    return out


def render_proposed(r: Proposed) -> dict[str, object]:
    """saihm_governance_propose "Result"."""
    return {
        "proposalId": hx(r.proposal_id),
        "scope": r.scope,
        "paramKey": r.param_key,
        "proposedValue": r.proposed_value,
        "snapshotEpoch": dec(r.snapshot_epoch),
        "proposerHash": hx(r.proposer),
        "receiptId": hx(r.receipt_id),
    }


def render_voted(r: Voted) -> dict[str, object]:
    """saihm_governance_vote "Result"; a repeat (the vote recorded first) has no receipt."""
    out: dict[str, object] = {
        "proposalId": hx(r.proposal_id),
        "voterHash": hx(r.voter),
        "approve": r.approve,
        "weight": dec(r.weight),
        "castAtEpoch": dec(r.cast_at),
    }
    if r.receipt_id is not None:
        out["receiptId"] = hx(r.receipt_id)
    return out
