"""The memory family of the binding: saihm_remember, saihm_recall, saihm_forget, saihm_status
and the extension methods saihm_record and saihm_forget_session, over ``operator.memory``
(:class:`saihm.operator.memory.MemoryTools`).

Each method's params parser, renderer (the tool's "Result") and :class:`Binding` row live
here together; :data:`ROWS` is what :mod:`saihm.protocol.binding` gathers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from saihm.errors import ErrorCode
from saihm.events.operations import METHODS
from saihm.names import check_namespace
from saihm.operator.governance import ProposalSummary
from saihm.operator.memory import (
    AlreadyErased,
    Forgotten,
    ForgottenSession,
    Recalled,
    RecallWindow,
    Recorded,
    Remembered,
    Status,
)
from saihm.protocol import params as P
from saihm.protocol.family import Binding, id_param, metadata_param, no_params, plain
from saihm.protocol.params import dec, hx
from saihm.protocol.render import RecallAnswer, RecallItems, item_bytes, recall_item
from saihm.protocol.window import encode_cursor, parse_window

if TYPE_CHECKING:
    from saihm.config import Config

__all__ = [
    "RECALL_PARAMS",
    "ROWS",
    "render_forgotten",
    "render_forgotten_session",
    "render_recalled",
    "render_remembered",
    "render_status",
]

RECALL_PARAMS = {"query", "limit", "maxBytes", "cursor", "namespaces", "kinds"}


# -- params ----------------------------------------------------------------------------------


def _remember_params(
    params: dict[str, Any], config: Config
) -> tuple[str, str, bytes | None, str | None]:
    p = P.check_params(params, {"content", "namespace", "supersedes", "metadata"}, {"content"})
    supersedes = p.get("supersedes")
    return (
        P.text(p, "content"),
        check_namespace(P.text(p, "namespace", default="memory", code=ErrorCode.BAD_NAMESPACE)),
        None if supersedes is None else P.id32(supersedes, what="supersedes"),
        metadata_param(p),
    )


def _record_params(params: dict[str, Any], config: Config) -> tuple[str, str, str | None]:
    p = P.check_params(params, {"content", "kind", "metadata"}, {"content", "kind"})
    return P.text(p, "content"), P.text(p, "kind"), metadata_param(p)


def _recall_params(params: dict[str, Any], config: Config) -> tuple[str, RecallWindow]:
    p = P.check_params(params, RECALL_PARAMS)
    query = P.text(p, "query", default="")
    return query, parse_window(p, queried=bool((query or "").split()))


# -- results ---------------------------------------------------------------------------------


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


# -- the rows --------------------------------------------------------------------------------

ROWS: tuple[Binding[Any, Any], ...] = (
    Binding(
        METHODS["saihm_remember"],
        _remember_params,
        lambda op, access, a: op.memory.remember(
            access, a[0], namespace=a[1], supersedes=a[2], metadata=a[3]
        ),
        plain(render_remembered),
    ),
    Binding(
        METHODS["saihm_recall"],
        _recall_params,
        lambda op, access, a: op.memory.recall(access, a[0], a[1]),
        render_recalled,
    ),
    Binding(
        METHODS["saihm_forget"],
        id_param("id"),
        lambda op, access, cell_id: op.memory.forget(access, cell_id),
        plain(render_forgotten),
    ),
    Binding(
        METHODS["saihm_status"],
        no_params,
        lambda op, access, _: op.memory.status(access),
        plain(render_status),
    ),
    Binding(
        METHODS["saihm_record"],
        _record_params,
        lambda op, access, a: op.memory.record(access, a[0], a[1], metadata=a[2]),
        plain(render_remembered),
    ),
    Binding(
        METHODS["saihm_forget_session"],
        id_param("sessionId"),
        lambda op, access, session_id: op.memory.forget_session(access, session_id),
        plain(render_forgotten_session),
    ),
)
