"""The protocol's JSON binding: parse a call, run the operation, render its result.

saihm-protocol "Request and response": a call is ``{"method", "params"}`` with a bearer
capability; the answer is the tool's result object (an array for recall) or ``{"error": code}``
with a failure status. This package is the only place where protocol params are parsed into
typed values and typed results are rendered as the protocol's JSON (hex ids, decimal-string
epochs); the operations (the parts of :class:`saihm.operator.Operator`) speak bytes and ints.

:data:`BINDINGS` is the binding half of the one operation registry: one :class:`Binding` row per
method of :data:`saihm.events.operations.METHODS` (the pure half, which the public log, the
projections, replay and the MCP surface check read), gathered from the family modules listed
in :data:`FAMILIES`. A family module holds, for the methods of one operator part, the params
parsers, the renderers and the rows, together. docs/internals.md "Adding an operation".

:func:`call` runs one call (the HTTP route :mod:`saihm.http.toolcall`, the benchmarks, tests);
:func:`parse_call` reads a request body.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from saihm.errors import Disabled, ErrorCode, MalformedInput, NotFound, NotPermitted
from saihm.events.operations import METHODS
from saihm.operator import Operator
from saihm.protocol import governance, memory, sharing
from saihm.protocol.family import Binding
from saihm.protocol.memory import RECALL_PARAMS
from saihm.protocol.render import RecallItems

__all__ = ["BINDINGS", "FAMILIES", "RECALL_PARAMS", "Binding", "call", "parse_call", "recall_items"]

#: The family modules, one per operator part; each lists its methods' rows in ``ROWS``.
FAMILIES = (memory, sharing, governance)


def _gather(*families: Any) -> Mapping[str, Binding[Any, Any]]:
    """The families' rows keyed by method name, in :data:`METHODS` order: exactly one row for
    every method."""
    rows: dict[str, Binding[Any, Any]] = {}
    for family in families:
        for row in family.ROWS:
            if row.method.name in rows:
                raise AssertionError(f"two binding rows for {row.method.name}")
            rows[row.method.name] = row
    if set(rows) != set(METHODS):
        raise AssertionError("BINDINGS must have one row for every METHODS entry")
    return MappingProxyType({name: rows[name] for name in METHODS})


BINDINGS: Mapping[str, Binding[Any, Any]] = _gather(*FAMILIES)


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
