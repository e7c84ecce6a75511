"""The operator extension params of saihm_recall that bound an answer (docs/retrieval.md).

saihm-protocol "Request and response": "Fields not defined here are operator extensions."
``limit``, ``maxBytes``, ``cursor``, ``namespaces`` and ``kinds`` only narrow or page what the
caller may see; without any of them the protocol's behaviour holds (every matching cell). The
answer carries the position to continue from and whether it was cut, which the HTTP binding
sends as the response headers ``Saihm-Recall-Cut`` and ``Saihm-Recall-Next``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from saihm.errors import MalformedInput

__all__ = [
    "CUT_HEADER",
    "KINDS",
    "MAX_LIMIT",
    "NEXT_HEADER",
    "RecallAnswer",
    "RecallItem",
    "RecallWindow",
    "item_bytes",
]

CUT_HEADER = "Saihm-Recall-Cut"
NEXT_HEADER = "Saihm-Recall-Next"
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
    if (
        not isinstance(value, list)
        or not 1 <= len(value) <= MAX_NAMES
        or not all(isinstance(v, str) and 1 <= len(v) <= 256 for v in value)
    ):
        raise MalformedInput(f"{name} must be a non-empty array of names", code="invalid_filter")
    if allowed is not None and not set(value) <= allowed:
        raise MalformedInput(f"{name} holds an unknown kind", code="invalid_filter")
    return frozenset(value)


@dataclass(frozen=True, slots=True)
class RecallWindow:
    """What part of a recall the caller asked for; the default is all of it."""

    limit: int | None = None
    max_bytes: int | None = None
    start: int | None = None
    namespaces: frozenset[str] | None = None
    kinds: frozenset[str] | None = None

    @classmethod
    def parse(cls, params: dict, *, queried: bool) -> RecallWindow:
        """The window of checked ``params``; raises :class:`MalformedInput` (400) for a value
        of the wrong type or range, or a cursor that is malformed or from the other kind of
        recall (an "all cells" cursor with a query, or the reverse)."""
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
        return cls(
            limit=limit,
            max_bytes=max_bytes,
            start=start,
            namespaces=None if namespaces is None else _names(namespaces, "namespaces"),
            kinds=None if kinds is None else _names(kinds, "kinds", KINDS),
        )


def encode_cursor(position: int, *, queried: bool) -> str:
    """The opaque cursor for a position: after a leaf index ("all cells") or an offset."""
    return f"{'q' if queried else 'a'}{position}"


def item_bytes(item: dict) -> int:
    """The UTF-8 size of one element as the binding sends it, with its separating comma."""
    return len(json.dumps(item, separators=(",", ":")).encode("utf-8")) + 1


class RecallItem(dict):
    """One recall element that cannot be changed: the operator hands out the same object to
    every caller that may see the cell (it is memoised with the verified cell), so a caller
    that tried to edit it would edit everyone's answer. Copy it (``dict(item)``) to edit."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a recall item is read-only; copy it with dict(item)")

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __copy__(self) -> dict:
        return dict(self)

    def __reduce__(self) -> tuple:
        return (dict, (dict(self),))


class RecallAnswer(list):
    """A recall's JSON array, with the binding's extension metadata beside it: ``cut`` (items
    remain beyond this answer) and ``next_cursor`` (pass it as ``cursor`` to continue)."""

    cut: bool = False
    next_cursor: str | None = None
