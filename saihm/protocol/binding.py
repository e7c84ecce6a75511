"""The protocol's JSON binding: parse a call, run the operation, render its result.

saihm-protocol "Request and response": a call is ``{"method", "params"}`` with a bearer
capability; the answer is the tool's result object (an array for recall) or ``{"error": code}``
with a failure status. This package is the only place where protocol params are parsed into
typed values and typed results are rendered as the protocol's JSON (hex ids, decimal-string
epochs); the operations (the parts of :class:`saihm.operator.Operator`) speak bytes and ints.

:data:`BINDINGS` is the binding half of the one operation registry: one :class:`Binding` row per
method of :data:`saihm.events.operations.METHODS` (the pure half, which the public log, the
projections, replay and the MCP surface check read). A row names the params parser, the
operation it calls (on the operator's part, such as ``op.sharing.share``) and the renderer of
its result. docs/internals.md "Adding an operation".

:func:`call` runs one call (the HTTP route :mod:`saihm.http.toolcall`, the benchmarks, tests);
:func:`parse_call` reads a request body.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from saihm.errors import Disabled, ErrorCode, MalformedInput, NotFound, NotPermitted, TooLarge
from saihm.events.models import METADATA_MAX_BYTES, dump_metadata
from saihm.events.operations import METHODS, Method
from saihm.names import check_namespace
from saihm.operator import (
    MODES,
    SCOPES,
    TERM_MAX,
    Operator,
    RecallWindow,
)
from saihm.protocol import params as P
from saihm.protocol.render import (
    RecallItems,
    render_forgotten,
    render_forgotten_session,
    render_proposed,
    render_recalled,
    render_remembered,
    render_responded,
    render_revoked,
    render_shared,
    render_status,
    render_voted,
)
from saihm.protocol.window import parse_window

if TYPE_CHECKING:
    from saihm.config import Config
    from saihm.store import Access

__all__ = ["BINDINGS", "RECALL_PARAMS", "Binding", "call", "parse_call", "recall_items"]

A = TypeVar("A")
R = TypeVar("R")

RECALL_PARAMS = {"query", "limit", "maxBytes", "cursor", "namespaces", "kinds"}


@dataclass(frozen=True, slots=True)
class Binding(Generic[A, R]):
    """One method of the binding: ``parse`` checks the params object (every member known,
    each of its type; raising :class:`MalformedInput` with the protocol's code) into the
    operation's arguments, ``invoke`` runs the operation with an :class:`Access`, ``render``
    turns its typed result into the protocol's JSON value, given the operator's recall
    rendering cache (:class:`RecallItems`)."""

    method: Method
    parse: Callable[[dict[str, Any], Config], A]
    invoke: Callable[[Operator, Access, A], R]
    render: Callable[[R, RecallItems], object]


# -- params ----------------------------------------------------------------------------------


def _metadata(p: Mapping[str, Any]) -> str | None:
    """The extension param ``metadata``: a JSON object kept beside the content (absent or
    null: none), as its one compact text form; over 1 MiB is 413 ``too_large``."""
    value = p.get("metadata")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedInput("metadata must be a JSON object")
    try:
        text = dump_metadata(value)
        size = len(text.encode("utf-8"))
    except (ValueError, RecursionError) as err:  # a lone surrogate, NaN or too deep
        raise MalformedInput("metadata is not valid JSON text") from err
    if size > METADATA_MAX_BYTES:
        raise TooLarge(f"metadata is over {METADATA_MAX_BYTES} bytes")
    return text


def _remember_params(
    params: dict[str, Any], config: Config
) -> tuple[str, str, bytes | None, str | None]:
    p = P.check_params(params, {"content", "namespace", "supersedes", "metadata"}, {"content"})
    supersedes = p.get("supersedes")
    return (
        P.text(p, "content"),
        check_namespace(P.text(p, "namespace", default="memory", code=ErrorCode.BAD_NAMESPACE)),
        None if supersedes is None else P.id32(supersedes, what="supersedes"),
        _metadata(p),
    )


def _record_params(params: dict[str, Any], config: Config) -> tuple[str, str, str | None]:
    p = P.check_params(params, {"content", "kind", "metadata"}, {"content", "kind"})
    return P.text(p, "content"), P.text(p, "kind"), _metadata(p)


def _recall_params(params: dict[str, Any], config: Config) -> tuple[str, RecallWindow]:
    p = P.check_params(params, RECALL_PARAMS)
    query = P.text(p, "query", default="")
    return query, parse_window(p, queried=bool((query or "").split()))


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


# -- the registry ----------------------------------------------------------------------------


def _rows(*rows: Binding[Any, Any]) -> Mapping[str, Binding[Any, Any]]:
    table = {row.method.name: row for row in rows}
    if set(table) != set(METHODS) or len(table) != len(rows):
        raise AssertionError("BINDINGS must have one row for every METHODS entry")
    return MappingProxyType(table)


def _m(name: str) -> Method:
    return METHODS[name]


def _plain(render: Callable[[R], object]) -> Callable[[R, RecallItems], object]:
    """A renderer that needs no cache."""
    return lambda result, _items: render(result)


_CONTRACT_ID = _id_param("contractId", ErrorCode.CONTRACT_NOT_FOUND)

BINDINGS: Mapping[str, Binding[Any, Any]] = _rows(
    Binding(
        _m("saihm_remember"),
        _remember_params,
        lambda op, access, a: op.memory.remember(
            access, a[0], namespace=a[1], supersedes=a[2], metadata=a[3]
        ),
        _plain(render_remembered),
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
        _plain(render_forgotten),
    ),
    Binding(
        _m("saihm_status"),
        _no_params,
        lambda op, access, _: op.memory.status(access),
        _plain(render_status),
    ),
    Binding(
        _m("saihm_share"),
        _share_params,
        lambda op, access, a: op.sharing.share(access, *a),
        _plain(render_shared),
    ),
    Binding(
        _m("saihm_revoke_share"),
        _CONTRACT_ID,
        lambda op, access, contract_id: op.sharing.revoke_share(access, contract_id),
        _plain(render_revoked),
    ),
    Binding(
        _m("saihm_governance_propose"),
        _propose_params,
        lambda op, access, a: op.governance.propose(access, *a),
        _plain(render_proposed),
    ),
    Binding(
        _m("saihm_governance_vote"),
        _vote_params,
        lambda op, access, a: op.governance.vote(access, *a),
        _plain(render_voted),
    ),
    Binding(
        _m("saihm_accept_contract"),
        _CONTRACT_ID,
        lambda op, access, contract_id: op.sharing.respond(access, contract_id, accept=True),
        _plain(render_responded),
    ),
    Binding(
        _m("saihm_decline_contract"),
        _CONTRACT_ID,
        lambda op, access, contract_id: op.sharing.respond(access, contract_id, accept=False),
        _plain(render_responded),
    ),
    Binding(
        _m("saihm_record"),
        _record_params,
        lambda op, access, a: op.memory.record(access, a[0], a[1], metadata=a[2]),
        _plain(render_remembered),
    ),
    Binding(
        _m("saihm_forget_session"),
        _id_param("sessionId"),
        lambda op, access, session_id: op.memory.forget_session(access, session_id),
        _plain(render_forgotten_session),
    ),
)


#: Each operator's recall rendering cache, made on its first call and gone with it.
_RECALL_ITEMS: weakref.WeakKeyDictionary[Operator, RecallItems] = weakref.WeakKeyDictionary()


def recall_items(operator: Operator) -> RecallItems:
    """The recall rendering cache of ``operator``'s calls (made on first use)."""
    items = _RECALL_ITEMS.get(operator)
    if items is None:
        items = _RECALL_ITEMS.setdefault(operator, RecallItems())
    return items


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
    return row.render(row.invoke(operator, access, args), recall_items(operator))


# -- the request body --------------------------------------------------------------------------


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
