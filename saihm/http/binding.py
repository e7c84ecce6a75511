"""The protocol's JSON binding: parse a call, run the operation, render its result.

saihm-protocol "Request and response": ``POST /`` carries ``{"method", "params"}`` with a bearer
capability; the answer is the tool's result object (an array for recall) or ``{"error": code}``
with a failure status. This module is the only place where protocol params are parsed into
typed values and typed results are rendered as the protocol's JSON (hex ids, decimal-string
epochs); the operations (the parts of :class:`saihm.operator.Operator`) speak bytes and ints.

:data:`BINDINGS` is the binding half of the one operation registry: one :class:`Binding` row per
method of :data:`saihm.events.operations.METHODS` (the pure half, which the public log, the
projections, replay and the MCP surface check read). A row names the params parser, the
operation it calls (on the operator's part, such as ``op.sharing.share``) and the renderer of
its result. docs/internals.md "Adding an operation".

:func:`call` runs one call in process (tests, benchmarks); :func:`handle` is the aiohttp route.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiohttp import web

from saihm import params as P
from saihm.errors import Disabled, ErrorCode, MalformedInput, NotFound, NotPermitted, TooLarge
from saihm.events.operations import METHODS, Method
from saihm.http.common import MAX_BODY, OPERATOR, bearer_token, json_response, run_sync
from saihm.operator import (
    MODES,
    SCOPES,
    TERM_MAX,
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
from saihm.recallwindow import (
    CUT_HEADER,
    NEXT_HEADER,
    RecallAnswer,
    RecallItem,
    RecallWindow,
    encode_cursor,
    item_bytes,
)

if TYPE_CHECKING:
    from saihm.config import Config
    from saihm.operator import Operator
    from saihm.store import Access, OpenedCell

__all__ = ["BINDINGS", "RECALL_PARAMS", "Binding", "call", "handle", "parse_call", "read_bounded"]

A = TypeVar("A")
R = TypeVar("R")

RECALL_PARAMS = {"query", "limit", "maxBytes", "cursor", "namespaces", "kinds"}


@dataclass(frozen=True, slots=True)
class Binding(Generic[A, R]):
    """One method of the binding: ``parse`` checks the params object (every member known,
    each of its type; raising :class:`MalformedInput` with the protocol's code) into the
    operation's arguments, ``invoke`` runs the operation with an :class:`Access`, ``render``
    turns its typed result into the protocol's JSON value."""

    method: Method
    parse: Callable[[dict[str, Any], Config], A]
    invoke: Callable[[Operator, Access, A], R]
    render: Callable[[R], object]


# -- params ----------------------------------------------------------------------------------


def _remember_params(params: dict[str, Any], config: Config) -> tuple[str, str]:
    p = P.check_params(params, {"content", "namespace"}, {"content"})
    return P.text(p, "content"), P.text(p, "namespace", default="memory")


def _record_params(params: dict[str, Any], config: Config) -> tuple[str, str]:
    p = P.check_params(params, {"content", "kind"}, {"content", "kind"})
    return P.text(p, "content"), P.text(p, "kind")


def _recall_params(params: dict[str, Any], config: Config) -> tuple[str, RecallWindow]:
    p = P.check_params(params, RECALL_PARAMS)
    query = P.text(p, "query", default="")
    return query, RecallWindow.parse(p, queried=bool((query or "").split()))


def _id_param(name: str, code: str = ErrorCode.BAD_REQUEST) -> Callable[..., bytes]:
    def parse(params: dict[str, Any], config: Config) -> bytes:
        p = P.check_params(params, {name}, {name})
        return P.id32(p.get(name), code=code, what=name)

    return parse


def _no_params(params: dict[str, Any], config: Config) -> None:
    P.check_params(params, set())


def _share_params(
    params: dict[str, Any], config: Config
) -> tuple[list[bytes], list[bytes], str, str, int | None]:
    names = {"granteeIdHashesHex", "shardIds", "type", "scope", "expiryEpoch"}
    p = P.check_params(params, names, names - {"expiryEpoch"})
    # Each member's defect answers the protocol's code for that member (saihm_share
    # "Errors"), so a client never meets an extension code it cannot interpret.
    grantees = [
        P.id32(
            g[2:] if g[:2] in ("0x", "0X") else g, code=ErrorCode.INVALID_GRANTEE, what="grantee"
        )
        for g in P.string_list(p, "granteeIdHashesHex", code=ErrorCode.INVALID_GRANTEE)
    ]
    shards = [
        P.id32(s, code=ErrorCode.SHARD_NOT_FOUND, what="shard")
        for s in P.string_list(p, "shardIds", code=ErrorCode.SHARD_NOT_FOUND)
    ]
    kind = P.text(p, "type", code=ErrorCode.INVALID_MODE)
    mode = MODES.get(kind) if isinstance(kind, str) else None
    if mode is None:
        raise MalformedInput(
            "type must be temporary, permanent or syndicate", code=ErrorCode.INVALID_MODE
        )
    scope = P.text(p, "scope", code=ErrorCode.INVALID_SCOPE)
    expiry = P.epoch(p.get("expiryEpoch"), "expiryEpoch")
    return grantees, shards, mode, scope, expiry


def _propose_params(params: dict[str, Any], config: Config) -> tuple[str, str | None, str | None]:
    p = P.check_params(params, {"scope", "paramKey", "proposedValue"}, {"scope"})
    scope = P.text(p, "scope", code=ErrorCode.UNKNOWN_SCOPE)
    if scope not in SCOPES:
        raise MalformedInput("unknown proposal scope", code=ErrorCode.UNKNOWN_SCOPE)
    key = P.text(p, "paramKey", nullable=True)
    value = P.text(p, "proposedValue", nullable=True)
    # Both go into the PROPOSE receipt, a log leaf (under 64 KiB); governable values are
    # short, so a bound here refuses what would otherwise fail inside the write.
    if any(v is not None and len(v) > TERM_MAX for v in (key, value)):
        raise MalformedInput(f"paramKey and proposedValue are at most {TERM_MAX} characters")
    if scope == "protocol_upgrade":
        key = value = None
    elif key not in config.governable or value is None:
        raise MalformedInput("paramKey is not governable here", code=ErrorCode.UNKNOWN_PARAM)
    return scope, key, value


def _vote_params(params: dict[str, Any], config: Config) -> tuple[bytes, bool]:
    p = P.check_params(params, {"proposalId", "approve"}, {"proposalId", "approve"})
    proposal_id = P.id32(p.get("proposalId"), code=ErrorCode.PROPOSAL_NOT_FOUND, what="proposalId")
    return proposal_id, P.boolean(p.get("approve"), "approve")


# -- results ---------------------------------------------------------------------------------


def render_remembered(r: Remembered) -> dict[str, object]:
    """saihm_remember "Result"; a :class:`Recorded` adds ``seq``, ``prev`` and ``kind``."""
    out: dict[str, object] = {
        "cellId": P.hx(r.cell_id),
        "cellNonce": P.hx(r.cell_nonce),
        "tier": r.tier,
        "kekVersion": r.kek_version,
        "epoch": P.dec(r.epoch),
        "signaturePrefix": P.hx(r.signature_prefix),
        "receiptId": P.hx(r.receipt_id),
    }
    if isinstance(r, Recorded):
        out.update(seq=r.seq, prev=None if r.prev is None else P.hx(r.prev), kind=r.kind)
    return out


def recall_item(opened: OpenedCell) -> RecallItem:
    """The protocol's recall element for a verified cell, memoised with it (the cell and its
    label cannot change; only whether this caller may see it, checked per call)."""
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


def render_recalled(r: Recalled) -> RecallAnswer:
    """saihm_recall "Result" (an array), cut to ``maxBytes`` of JSON and carrying where to go
    on (docs/retrieval.md "Extension params"). Elements carry the protocol's fields and the
    extensions ``kind``, ``namespace``, ``sessionId`` and, for a query, ``score``."""
    page, window = r.page, r.window
    answer = RecallAnswer(recall_item(c) for c in page.cells)
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
        "cellId": P.hx(r.cell_id),
        "destructionAnchor": P.hx(r.destruction_anchor),
        "epoch": P.dec(r.epoch),
    }


def render_forgotten_session(r: ForgottenSession) -> dict[str, object]:
    """saihm_forget_session: the session, how many cells, their ids and receipts."""
    return {
        "sessionId": P.hx(r.session_id),
        "erased": len(r.cell_ids),
        "cellIds": [P.hx(i) for i in r.cell_ids],
        "receiptIds": [P.hx(i) for i in r.receipt_ids],
    }


def _proposal(p: ProposalSummary) -> dict[str, object]:
    return {
        "propId": P.hx(p.proposal_id),
        "scope": p.scope,
        "paramKey": p.param_key,
        "proposedValue": p.proposed_value,
        "opens_ts": P.dec(p.opens),
        "closes_ts": P.dec(p.closes),
        "tally_for": P.dec(p.tally_for),
        "tally_against": P.dec(p.tally_against),
        "tally_abstain": P.dec(p.tally_abstain),
    }


def render_status(r: Status) -> dict[str, object]:
    """saihm_status "Result" with the extensions ``incomingContracts`` and ``sessionId``."""
    out: dict[str, object] = {
        "agentIdHashHex": P.hx(r.holder_id),
        "custody": "custodial",
        "bfsi_window_start_ts": P.dec(r.window_start),
        "bfsi_R": P.dec(r.receipts_in_window),
        "shards": r.shards,
        "contracts": [
            {
                "contractId": P.hx(c.contract_id),
                "mode": c.mode,
                "granteeIds": [P.hx(g) for g in c.grantee_ids],
                "expiresAt": P.dec(c.expires_at),
            }
            for c in r.contracts
        ],
        "incomingContracts": [
            {
                "contractId": P.hx(c.contract_id),
                "holderIdHex": P.hx(c.holder_id),
                "mode": c.mode,
                "accepted": c.accepted,
                "expiresAt": P.dec(c.expires_at),
            }
            for c in r.incoming
        ],
        "governance": [_proposal(p) for p in r.governance],
        "sessionId": None if r.session_id is None else P.hx(r.session_id),
    }
    if r.prs is not None:
        out["prs"] = r.prs
    return out


def render_shared(r: Shared) -> dict[str, object]:
    """saihm_share "Result"."""
    return {
        "contractId": P.hx(r.contract_id),
        "type": r.mode.lower(),
        "granteeCount": r.grantee_count,
        "epoch": P.dec(r.epoch),
        "expiresAt": P.dec(r.expires_at),
        "receiptId": P.hx(r.receipt_id),
    }


def render_revoked(r: Revoked) -> dict[str, object]:
    """saihm_revoke_share "Result"; a repeat carries no ``receiptId``."""
    out: dict[str, object] = {"revoked": True, "epoch": P.dec(r.epoch)}
    if r.receipt_id is not None:
        out["receiptId"] = P.hx(r.receipt_id)
    return out


def render_responded(r: Responded) -> dict[str, object]:
    """saihm_accept_contract / saihm_decline_contract; a repeat carries no ``receiptId``."""
    out: dict[str, object] = {"contractId": P.hx(r.contract_id), "accepted": r.accepted}
    if r.receipt_id is not None:
        out["receiptId"] = P.hx(r.receipt_id)
    return out


def render_proposed(r: Proposed) -> dict[str, object]:
    """saihm_governance_propose "Result"."""
    return {
        "proposalId": P.hx(r.proposal_id),
        "scope": r.scope,
        "paramKey": r.param_key,
        "proposedValue": r.proposed_value,
        "snapshotEpoch": P.dec(r.snapshot_epoch),
        "proposerHash": P.hx(r.proposer),
        "receiptId": P.hx(r.receipt_id),
    }


def render_voted(r: Voted) -> dict[str, object]:
    """saihm_governance_vote "Result"; a repeat (the vote recorded first) has no receipt."""
    out: dict[str, object] = {
        "proposalId": P.hx(r.proposal_id),
        "voterHash": P.hx(r.voter),
        "approve": r.approve,
        "weight": P.dec(r.weight),
        "castAtEpoch": P.dec(r.cast_at),
    }
    if r.receipt_id is not None:
        out["receiptId"] = P.hx(r.receipt_id)
    return out


# -- the registry ----------------------------------------------------------------------------


def _rows(*rows: Binding[Any, Any]) -> Mapping[str, Binding[Any, Any]]:
    table = {row.method.name: row for row in rows}
    if set(table) != set(METHODS) or len(table) != len(rows):
        raise AssertionError("BINDINGS must have one row for every METHODS entry")
    return MappingProxyType(table)


def _m(name: str) -> Method:
    return METHODS[name]


_CONTRACT_ID = _id_param("contractId", ErrorCode.CONTRACT_NOT_FOUND)

BINDINGS: Mapping[str, Binding[Any, Any]] = _rows(
    Binding(
        _m("saihm_remember"),
        _remember_params,
        lambda op, access, a: op.memory.remember(access, a[0], namespace=a[1]),
        render_remembered,
    ),
    Binding(
        _m("saihm_recall"),
        _recall_params,
        lambda op, access, a: op.memory.recall(access, a[0], a[1]),
        render_recalled,
    ),
    Binding(
        _m("saihm_forget"),
        _id_param("id"),
        lambda op, access, cell_id: op.memory.forget(access, cell_id),
        render_forgotten,
    ),
    Binding(
        _m("saihm_status"),
        _no_params,
        lambda op, access, _: op.memory.status(access),
        render_status,
    ),
    Binding(
        _m("saihm_share"),
        _share_params,
        lambda op, access, a: op.sharing.share(access, *a),
        render_shared,
    ),
    Binding(
        _m("saihm_revoke_share"),
        _CONTRACT_ID,
        lambda op, access, contract_id: op.sharing.revoke_share(access, contract_id),
        render_revoked,
    ),
    Binding(
        _m("saihm_governance_propose"),
        _propose_params,
        lambda op, access, a: op.governance.propose(access, *a),
        render_proposed,
    ),
    Binding(
        _m("saihm_governance_vote"),
        _vote_params,
        lambda op, access, a: op.governance.vote(access, *a),
        render_voted,
    ),
    Binding(
        _m("saihm_accept_contract"),
        _CONTRACT_ID,
        lambda op, access, contract_id: op.sharing.respond(access, contract_id, accept=True),
        render_responded,
    ),
    Binding(
        _m("saihm_decline_contract"),
        _CONTRACT_ID,
        lambda op, access, contract_id: op.sharing.respond(access, contract_id, accept=False),
        render_responded,
    ),
    Binding(
        _m("saihm_record"),
        _record_params,
        lambda op, access, a: op.memory.record(access, *a),
        render_remembered,
    ),
    Binding(
        _m("saihm_forget_session"),
        _id_param("sessionId"),
        lambda op, access, session_id: op.memory.forget_session(access, session_id),
        render_forgotten_session,
    ),
)


def call(operator: Operator, token: str | None, method: object, params: object) -> object:
    """Run one binding call: ``{"method", "params"}`` with a bearer capability; the result's
    JSON value (a :class:`RecallAnswer` for recall).

    In this order: an unknown method is :class:`NotFound` ("unknown_method"), a governance
    tool on an operator without governance :class:`Disabled` ("governance_disabled"), then the
    token is authenticated (a consumer grant is refused: it reads through the provider API
    only), then the params are checked. Raises a :class:`SaihmError` whose ``code`` is the
    protocol error code.
    """
    row = BINDINGS.get(method) if isinstance(method, str) else None
    if row is None:
        raise NotFound("unknown method", code=ErrorCode.UNKNOWN_METHOD)
    if row.method.governance and not operator.config.governance:
        raise Disabled("governance is not enabled", code=ErrorCode.GOVERNANCE_DISABLED)
    access = operator.store.authenticate(token)
    if access.consumer is not None:
        raise NotPermitted("a consumer grant reads through the provider API only")
    args = row.parse(params if params is not None else {}, operator.config)  # type: ignore[arg-type]
    return row.render(row.invoke(operator, access, args))


# -- POST / ----------------------------------------------------------------------------------


def _reject_constant(name: str) -> object:
    raise MalformedInput("NaN and Infinity are not JSON")


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise MalformedInput("duplicate member in a JSON object")
    return out


def parse_call(body: bytes) -> tuple[str, dict[str, Any]]:
    """Parse ``{"method": string, "params": object}`` (params may be absent).

    Raises :class:`MalformedInput` ("bad_request") for anything else: bytes that are not
    UTF-8 JSON, a non-object body, a missing or non-string method, non-object params,
    duplicate members or members other than these two.
    """
    try:
        request = json.loads(
            body.decode("utf-8"),
            parse_constant=_reject_constant,
            object_pairs_hook=_unique_members,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise MalformedInput("the body is not a JSON object") from err
    if not isinstance(request, dict):
        raise MalformedInput("the body must be a JSON object")
    if set(request) - {"method", "params"}:
        raise MalformedInput("the body holds members other than method and params")
    method = request.get("method")
    params = request.get("params", {})
    if not isinstance(method, str):
        raise MalformedInput("method must be a string")
    if not isinstance(params, dict):
        raise MalformedInput("params must be a JSON object")
    return method, params


async def read_bounded(request: web.Request) -> bytes:
    """The request body, refusing (413 "too_large") one over ``client_max_size``.

    A declared Content-Length over the bound is refused before any of the body is read; a
    chunked body is read only up to the bound (aiohttp stops at ``client_max_size``).
    """
    limit = request.app[MAX_BODY]
    if request.content_length is not None and request.content_length > limit:
        raise TooLarge("request body too large")
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as err:
        raise TooLarge("request body too large") from err
    except web.RequestPayloadError as err:
        # A body whose framing breaks after the handler started (a bad chunk, a short body):
        # the client's fault, and the message (which quotes the bytes) is not kept.
        raise MalformedInput("the request body is malformed") from err


async def handle(request: web.Request) -> web.Response:
    """``POST /``: one tool call; the result object (an array for recall) or ``{"error"}``.

    saihm-protocol "Request and response": no outer envelope; 2xx on success, 4xx/5xx with the
    tool's error code on failure; an unknown method or a disabled tool answers a failure status.
    """
    token = bearer_token(request)
    body = await read_bounded(request)
    method, params = parse_call(body)
    result = await run_sync(request, call, request.app[OPERATOR], token, method, params)
    response = json_response(result)
    if isinstance(result, RecallAnswer):
        # docs/retrieval.md "Extension params": whether the answer was cut, and where to go on.
        response.headers[CUT_HEADER] = "true" if result.cut else "false"
        if result.next_cursor is not None:
            response.headers[NEXT_HEADER] = result.next_cursor
    return response
