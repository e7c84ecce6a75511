"""The operator extension params of saihm_recall that bound an answer (docs/retrieval.md).

saihm-protocol "Request and response": "Fields not defined here are operator extensions."
``limit``, ``maxBytes``, ``cursor``, ``namespaces`` and ``kinds`` only narrow or page what the
caller may see; without any of them the protocol's behaviour holds (every matching cell).
:func:`parse_window` turns them into the operator's typed :class:`RecallWindow`; the answer's
cursor (:func:`encode_cursor`) is what the HTTP binding sends as ``Saihm-Recall-Next``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from saihm.errors import MalformedInput
from saihm.names import check_namespace
from saihm.operator import RecallWindow

__all__ = ["KINDS", "MAX_LIMIT", "MAX_NAMES", "encode_cursor", "parse_window"]

KINDS = frozenset({"memory", "said", "did", "end"})
MAX_LIMIT = 100_000
MAX_NAMES = 64
_CURSOR = re.compile(r"([aq])([0-9]{1,19})")
_DIGITS = re.compile(r"[0-9]{1,19}")


def _count(value: object, name: str, code: str) -> int | None:
    """A positive integer sent as a JSON number or a decimal string; None when absent."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise MalformedInput(f"{name} must be a positive integer", code=code)
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        value = int(value)
    if not isinstance(value, int) or value < 1:
        raise MalformedInput(f"{name} must be a positive integer", code=code)
    return value


def _names(value: object, name: str, allowed: frozenset[str] | None = None) -> frozenset[str]:
    """A non-empty array of at most :data:`MAX_NAMES` strings (``invalid_filter`` otherwise):
    kinds among ``allowed``, or namespaces that are names (``bad_namespace``,
    :func:`saihm.names.check_namespace`)."""
    if (
        not isinstance(value, list)
        or not 1 <= len(value) <= MAX_NAMES
        or not all(isinstance(v, str) for v in value)
    ):
        raise MalformedInput(f"{name} must be a non-empty array of names", code="invalid_filter")
    if allowed is not None and not set(value) <= allowed:
        raise MalformedInput(f"{name} holds an unknown kind", code="invalid_filter")
    if allowed is None:
        for namespace in value:
            check_namespace(namespace)
    return frozenset(value)


def parse_window(params: Mapping[str, Any], *, queried: bool) -> RecallWindow:
    """The window of checked ``params``; raises :class:`MalformedInput` (400) for a value of
    the wrong type or range, or a cursor that is malformed or from the other kind of recall
    (an "all cells" cursor with a query, or the reverse)."""
    limit = _count(params.get("limit"), "limit", "invalid_limit")
    if limit is not None and limit > MAX_LIMIT:
        raise MalformedInput("limit is too large", code="invalid_limit")
    max_bytes = _count(params.get("maxBytes"), "maxBytes", "invalid_max_bytes")
    start = None
    cursor = params.get("cursor")
    if cursor is not None:
        match = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
        if match is None or (match[1] == "q") != queried:
            raise MalformedInput("cursor is not one this recall issued", code="invalid_cursor")
        start = int(match[2])
    namespaces = params.get("namespaces")
    kinds = params.get("kinds")
    return RecallWindow(
        limit=limit,
        max_bytes=max_bytes,
        start=start,
        namespaces=None if namespaces is None else _names(namespaces, "namespaces"),
        kinds=None if kinds is None else _names(kinds, "kinds", KINDS),
    )


def encode_cursor(position: int, *, queried: bool) -> str:
    """The opaque cursor for a position: after a leaf index ("all cells") or an offset."""
    return f"{'q' if queried else 'a'}{position}"
