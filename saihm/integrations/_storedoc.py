"""The pure part of the LangGraph store adapter: how an item is kept in a SAIHM cell, how a
namespace tuple becomes a SAIHM namespace, and LangGraph's filter and namespace-match rules.

Nothing here talks to an operator or imports LangGraph, so it is tested on its own
(tests/integrations/test_storedoc.py, with hypothesis).

A LangGraph namespace ``(l1, ..., ln)`` (n >= 1; labels non-empty strings without "." or
NUL, LangGraph's own rule, ``langgraph.store.base``) is the SAIHM namespace
``"lg:" + "l1.l2....ln"``: the operator keeps it inside the sealed payload, so it is
authenticated with the cell and a token limited to some namespaces (``saihm grant
--namespaces``) limits the store the same way. SAIHM namespaces are 1 to 256 characters, so
the joined labels may be at most 253 characters.

An item is one memory cell whose text (what recall ranks and the person's page and MCP show)
is the value's own text (:func:`value_text`), and whose ``metadata`` (saihm_remember's
extension param, sealed beside the text and never ranked) is the document
``{"saihm-store": 1, "key": KEY, "value": VALUE, "created_at": US, "updated_at": US}``
(microseconds since the UNIX epoch, UTC, from the adapter's clock). A cell written before
``metadata`` existed, whose text is that document, is still read as its item. Any other cell,
a record entry, or a cell shared by another holder is never read as an item.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "MAX_MICROS",
    "MAX_NAMESPACE_CHARS",
    "NAMESPACE_PREFIX",
    "STORE_MARK",
    "InvalidLabel",
    "StoredItem",
    "check_filter",
    "check_labels",
    "current",
    "decode_namespace",
    "encode_namespace",
    "item_content",
    "item_metadata",
    "matches_filter",
    "matches_path",
    "now_micros",
    "parse_item",
    "to_datetime",
    "value_text",
]

NAMESPACE_PREFIX = "lg:"
STORE_MARK = "saihm-store"
MAX_NAMESPACE_CHARS = 256
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The last microsecond a datetime can hold (9999-12-31T23:59:59.999999Z).
MAX_MICROS = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


class InvalidLabel(ValueError):
    """A namespace LangGraph forbids, or one too long for a SAIHM namespace."""


def check_labels(labels: Sequence[object]) -> tuple[str, ...]:
    """``labels`` as a tuple, or :class:`InvalidLabel` for a label that is not a non-empty
    string free of "." and NUL (langgraph.store.base's label rule)."""
    for label in labels:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidLabel("namespace labels must be non-empty strings without '.' or NUL")
    return tuple(labels)  # type: ignore[arg-type]


def encode_namespace(namespace: Sequence[object]) -> str:
    """The SAIHM namespace holding the items of LangGraph ``namespace`` (module docstring).

    Raises :class:`InvalidLabel` for an empty namespace, a bad label, or an encoding longer
    than 256 characters (the operator's namespace bound, ``_check_writable`` in
    saihm/operator/memory.py).
    """
    labels = check_labels(namespace)
    if not labels:
        raise InvalidLabel("a namespace needs at least one label")
    name = NAMESPACE_PREFIX + ".".join(labels)
    if len(name) > MAX_NAMESPACE_CHARS:
        raise InvalidLabel(
            f"namespace too long: its labels joined by '.' may hold at most "
            f"{MAX_NAMESPACE_CHARS - len(NAMESPACE_PREFIX)} characters"
        )
    return name


def decode_namespace(name: str | None) -> tuple[str, ...] | None:
    """The LangGraph namespace a SAIHM namespace encodes, or None if it encodes none."""
    if name is None or not name.startswith(NAMESPACE_PREFIX):
        return None
    labels = tuple(name[len(NAMESPACE_PREFIX) :].split("."))
    try:
        check_labels(labels)
    except InvalidLabel:
        return None
    return labels


def to_datetime(micros: int) -> datetime:
    """UTC datetime of ``micros`` microseconds since the epoch (exact, no float rounding)."""
    return _EPOCH + timedelta(microseconds=micros)


def now_micros() -> int:
    """The adapter's clock, in microseconds since the epoch."""
    return (datetime.now(UTC) - _EPOCH) // timedelta(microseconds=1)


def item_metadata(
    key: str, value: Mapping[str, Any], created_at: int, updated_at: int
) -> dict[str, Any]:
    """The ``metadata`` of the cell that stores ``value`` under ``key`` (module docstring).

    Raises ``ValueError``/``TypeError`` (before anything is sent) for a value JSON cannot
    hold exactly: a non-string key, NaN or infinity, or an object JSON does not know.
    """
    if not isinstance(value, Mapping):
        raise TypeError("a store value must be a mapping with string keys")
    body = {
        STORE_MARK: 1,
        "key": key,
        "value": dict(value),
        "created_at": created_at,
        "updated_at": updated_at,
    }
    _check_json_keys(body["value"])
    json.dumps(body, allow_nan=False)  # NaN, infinity or an unknown object: refused now
    return body


def item_content(key: str, value: Mapping[str, Any], created_at: int, updated_at: int) -> str:
    """The plaintext an item's cell had before ``metadata`` existed: the document of
    :func:`item_metadata` as compact JSON (still read by :func:`parse_item`)."""
    body = item_metadata(key, value, created_at, updated_at)
    return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def value_text(key: str, value: Mapping[str, Any]) -> str:
    """The text of a store value, for people and for the ranking: a value with one scalar
    (``{"text": "likes pizza"}``) is that scalar; otherwise one ``path: scalar`` line per
    scalar, in the value's order (``path`` joins the keys with "."; list positions are left
    out); a value with none is named by its ``key``. Never blank."""
    leaves = list(_leaves(value, ""))
    if len(leaves) == 1:
        return _scalar(leaves[0][1])
    if leaves:
        return "\n".join(f"{path}: {_scalar(v)}" if path else _scalar(v) for path, v in leaves)
    return key if key.strip() else "(empty value)"


def _leaves(value: object, path: str) -> Iterable[tuple[str, object]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v, path)
    elif value is not None and not (isinstance(value, str) and not value.strip()):
        yield path, value


def _scalar(value: object) -> str:
    return value.strip() if isinstance(value, str) else json.dumps(value)


def _check_json_keys(value: object) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError("store values may only have string keys (JSON objects)")
            _check_json_keys(v)
    elif isinstance(value, list | tuple):
        for v in value:
            _check_json_keys(v)


@dataclass(frozen=True, slots=True)
class StoredItem:
    """One cell read as a store item."""

    cell_id: str
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: int
    updated_at: int

    @property
    def order(self) -> tuple[int, str]:
        """Which of two cells of one key is current: the later ``updated_at``, then the
        larger cellId (two racing writers leave both; every reader picks the same one)."""
        return self.updated_at, self.cell_id


def parse_item(
    cell_id: str,
    namespace: str | None,
    kind: str | None,
    shared: bool,
    plaintext: str,
    metadata: Mapping[str, Any] | None = None,
) -> StoredItem | None:
    """The item a recalled cell holds, or None when the cell is not one this adapter wrote
    (other kind, another holder's, another namespace, or neither ``metadata`` nor, for a cell
    written before it existed, ``plaintext`` is the document of :func:`item_metadata`)."""
    labels = decode_namespace(namespace)
    if labels is None or kind != "memory" or shared:
        return None
    body: object = metadata
    if metadata is None:
        try:
            body = json.loads(plaintext)
        except ValueError:
            return None
    if not isinstance(body, Mapping) or body.get(STORE_MARK) != 1:
        return None
    key, value = body.get("key"), body.get("value")
    created, updated = body.get("created_at"), body.get("updated_at")
    if not isinstance(key, str) or not isinstance(value, dict):
        return None
    if not all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= MAX_MICROS
        for t in (created, updated)
    ):
        return None
    return StoredItem(cell_id, labels, key, value, created, updated)  # type: ignore[arg-type]


def current(items: Iterable[StoredItem]) -> dict[tuple[tuple[str, ...], str], list[StoredItem]]:
    """Cells grouped by (namespace, key), the current one first (:attr:`StoredItem.order`)."""
    groups: dict[tuple[tuple[str, ...], str], list[StoredItem]] = {}
    for item in items:
        groups.setdefault((item.namespace, item.key), []).append(item)
    for cells in groups.values():
        cells.sort(key=lambda c: c.order, reverse=True)
    return groups


# -- LangGraph's filter (SearchOp.filter) and namespace matching (MatchCondition) ----------


def check_filter(filter_: Mapping[str, Any] | None) -> None:
    """``ValueError`` for an operator LangGraph does not define ($eq, $ne, $gt, $gte, $lt,
    $lte), checked before anything is sent."""
    if filter_ is None:
        return
    if not isinstance(filter_, Mapping):
        raise ValueError("a search filter must be a mapping")
    for wanted in filter_.values():
        _check_condition(wanted)


def _check_condition(wanted: object) -> None:
    if isinstance(wanted, Mapping):
        operators = [k for k in wanted if isinstance(k, str) and k.startswith("$")]
        for name in operators:
            if name not in _OPERATORS:
                raise ValueError(f"unsupported filter operator {name!r}")
        if not operators:
            for inner in wanted.values():
                _check_condition(inner)


def matches_filter(value: Mapping[str, Any], filter_: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` meets every condition of ``filter_`` (langgraph.store.base
    ``SearchOp.filter``): a plain value is equality (a nested mapping compares field by
    field, a list element by element); ``{"$op": x}`` compares with the operator. Ordering
    operators compare numbers numerically and strings lexicographically; anything else
    (a missing field, mixed types) does not match."""
    if not filter_:
        return True
    return all(_matches(value.get(k), wanted) for k, wanted in filter_.items())


def _matches(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_operator(actual, op, operand) for op, operand in wanted.items())
        if not isinstance(actual, Mapping):
            return False
        return all(_matches(actual.get(k), w) for k, w in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_matches(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return _equal(actual, wanted)


def _is_number(x: object) -> bool:
    return (
        isinstance(x, int | float)
        and not isinstance(x, bool)
        and not (isinstance(x, float) and math.isnan(x))
    )


def _equal(a: Any, b: Any) -> bool:
    # JSON has one number type, but true is not 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _matches(actual, operand)
    if op == "$ne":
        return not _matches(actual, operand)
    if _is_number(actual) and _is_number(operand):
        pass
    elif not (isinstance(actual, str) and isinstance(operand, str)):
        return False
    if op == "$gt":
        return bool(actual > operand)
    if op == "$gte":
        return bool(actual >= operand)
    if op == "$lt":
        return bool(actual < operand)
    if op == "$lte":
        return bool(actual <= operand)
    raise ValueError(f"unsupported filter operator {op!r}")


def matches_path(match_type: str, path: Sequence[str], namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` starts (``"prefix"``) or ends (``"suffix"``) with ``path``,
    where a ``"*"`` label matches any one label (langgraph.store.base ``MatchCondition``)."""
    if len(namespace) < len(path):
        return False
    if match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type {match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)
