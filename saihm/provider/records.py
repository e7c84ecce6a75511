"""Records as cells: the sealed JSON form of a record and its reading back.

A record's sealed payload content is compact JSON ``{"saihm-memory": 1, "content": ...,
"confidence"?, "verified_at"?, "sources"?}`` (keys sorted); the namespace is the sealed
namespace label, the id is the cellId and ``created_at`` the cell timestamp. A cell of the same
holder that is not in this form (written by ``saihm_remember`` or ``saihm_record``) is shown
with its plaintext as ``content``: what the grant lets the consumer see is the namespace, not
the writer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from saihm.errors import ErrorCode, MalformedInput, TooLarge
from saihm.names import BadNamespace
from saihm.provider.models import MAX_CONTENT_BYTES, MemoryRecord, MemoryStore, iso8601
from saihm.retrieval import analyse, analyse_query
from saihm.retrieval.context import TURN_KINDS, Item, in_order, rank_in_context
from saihm.store import OpenedCell

MARK = "saihm-memory"
_META = ("confidence", "verified_at", "sources")


def dumps(obj: object) -> str:
    """Compact, key-sorted JSON (the sealed form and the byte-budget measure)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def seal_text(request: MemoryStore) -> str:
    """The string sealed into the cell for ``request``; raises ``TooLarge`` over 64 KiB."""
    body: dict[str, Any] = {MARK: 1, "content": request.content}
    for name in _META:
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    text = dumps(body)
    if len(text.encode("utf-8")) > MAX_CONTENT_BYTES:
        raise TooLarge("record content is over 64 KiB")
    return text


def parse_sealed(text: str) -> dict[str, Any] | None:
    """The record fields of a sealed string, or None if it is not in the vault's form."""
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get(MARK) != 1 or "content" not in body:
        return None
    return {k: body[k] for k in ("content", *_META) if k in body}


def to_record(opened: OpenedCell) -> MemoryRecord:
    """The RFC record for a cell that passed the store's checked read."""
    payload = opened.payload
    fields = parse_sealed(payload.content) or {"content": payload.content}
    stamp = iso8601(opened.cell.timestamp)
    try:
        return MemoryRecord(
            id=opened.cell.cell_id.hex(),
            namespace=payload.namespace,
            created_at=stamp,
            updated_at=stamp,
            **fields,
        )
    except ValueError:
        # Sealed metadata out of range: show the content, drop the metadata.
        return MemoryRecord(
            id=opened.cell.cell_id.hex(),
            namespace=payload.namespace,
            content=fields.get("content"),
            created_at=stamp,
            updated_at=stamp,
        )


def _words(value: object) -> list[str]:
    """The searchable text of a content value: its strings and numbers, not its keys."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [str(value)]
    if isinstance(value, dict):
        return [w for v in value.values() for w in _words(v)]
    if isinstance(value, list | tuple):
        return [w for v in value for w in _words(v)]
    return []


def searchable(record: MemoryRecord) -> str:
    """The text a query is matched and ranked against: the record's content values."""
    return "\n".join(_words(record.content))


def ranked(opened: Sequence[OpenedCell], records: Sequence[MemoryRecord], text: str) -> list[int]:
    """The positions of ``records`` (``records[i]`` is ``opened[i]``'s) that match ``text``,
    most relevant first, by the ranking of ``saihm_recall`` (docs/retrieval.md "Matching",
    "Ranking", "Context") over their searchable text: every record given is one the caller
    may see, so statistics and context come from those only."""
    items = [
        Item(
            i,
            analyse(searchable(record)),
            cell.index,
            (cell.cell.holder_id, cell.payload.session_id, cell.payload.namespace),
            cell.cell.holder_id,
            cell.payload.kind in TURN_KINDS,
        )
        for i, (cell, record) in enumerate(zip(opened, records, strict=True))
    ]
    return [cast(int, r.key) for r in rank_in_context(analyse_query(text), items, in_order(items))]


def content_matches(record: MemoryRecord, text: str | None) -> bool:
    """True if every whitespace-separated keyword of ``text`` occurs, case-insensitively, in
    the record's content (issue #15: field names and the ``saihm-memory`` marker never match).

    A blank ``text`` matches every record.
    """
    terms = [t.casefold() for t in (text or "").split()]
    if not terms:
        return True
    haystack = "\n".join(_words(record.content)).casefold()
    return all(t in haystack for t in terms)


def record_size(record: MemoryRecord) -> int:
    """Bytes the record takes in an excerpt (compact JSON, UTF-8)."""
    return len(dumps(record.model_dump(mode="json")).encode("utf-8"))


def parse_store(raw: str, namespace: str, **meta: object) -> MemoryStore:
    """A :class:`MemoryStore` from command-line JSON; raises ``MalformedInput``."""
    try:
        content = json.loads(raw)
    except ValueError as err:
        raise MalformedInput("--json is not valid JSON") from err
    fields = {k: v for k, v in meta.items() if v is not None}
    try:
        # The metadata is the command line's, unchecked: the model validates it.
        return MemoryStore.model_validate({"namespace": namespace, "content": content, **fields})
    except ValueError as err:
        raise schema_refusal(err) from err


def schema_refusal(err: ValueError) -> MalformedInput:
    """The refusal of a pydantic validation error: :class:`~saihm.names.BadNamespace` when a
    namespace broke the shared rule, otherwise ``bad_request``; the message never echoes the
    input (:func:`validation_message`)."""
    errors = getattr(err, "errors", None)
    message = validation_message(err)
    if callable(errors) and any(e.get("type") == ErrorCode.BAD_NAMESPACE for e in errors()):
        return BadNamespace(message)
    return MalformedInput(message)


def validation_message(err: ValueError) -> str:
    """A one-line description of a pydantic validation error (never echoes the input)."""
    errors = getattr(err, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"invalid {where or 'input'}: {first.get('msg', 'bad value')}"
    return "invalid input"
