"""The chat entries the adapters write into the host's record, read back strictly.

An adapter that keeps a chat as the record (docs/integrations.md, "Framework adapters")
writes each message as one ``saihm_record`` entry of kind ``said``: its content is the
message's text for people and for the ranking (:func:`entry_text`, ``"user: hello"``), and
its ``metadata`` (kept beside the text, never ranked or shown as content) the JSON object
carrying the adapter's mark (``{MARK: 1, "at": <time_ns>, "message": {...}, ...}``), from which
the message is read back exactly. An entry written before ``metadata`` existed, whose content
is that object, is still read. Anything else is not a message: another kind, another
holder's cell, a body that is not such an object, a missing or non-integer time, or a message
that is not an object.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from saihm.client import RecalledCell

__all__ = ["chat_entry", "entry_text", "message_text"]

#: The keys under which the frameworks keep a message's text (LangChain ``content``,
#: LlamaIndex ``blocks[].text``, the Agents SDK ``content`` / ``output``).
_TEXT_KEYS = ("text", "content", "blocks", "output")


def message_text(value: object) -> str:
    """The text a message (or a part of one) holds: a string as it is; a list, its parts'
    texts on separate lines; an object, the text under its first text-bearing key
    (``text``, ``content``, ``blocks``, ``output``). "" when it holds none."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list | tuple):
        return "\n".join(t for t in (message_text(v) for v in value) if t)
    if isinstance(value, Mapping):
        for key in _TEXT_KEYS:
            text = message_text(value.get(key))
            if text:
                return text
    return ""


def entry_text(role: object, message: object, what: object = None) -> str:
    """The content of a chat entry: ``"role: text"``; for a message with no text (a tool
    call, say) ``"role: (what)"`` — never blank, as the operator requires."""
    speaker = role if isinstance(role, str) and role.strip() else "message"
    text = message_text(message)
    if text:
        return f"{speaker}: {text}"
    label = what if isinstance(what, str) and what.strip() else "no text"
    return f"{speaker}: ({label})"


def _body(cell: RecalledCell) -> object:
    if cell.metadata is not None:
        return cell.metadata
    try:
        return json.loads(cell.plaintext)
    except ValueError:
        return None


def chat_entry(cell: RecalledCell, mark: str) -> tuple[int, dict[str, Any], dict[str, Any]] | None:
    """``(at, message, whole body)`` of a chat entry written under ``mark``, else None."""
    if cell.kind != "said" or cell.shared_by_other_holder:
        return None
    body = _body(cell)
    if not isinstance(body, dict) or body.get(mark) != 1:
        return None
    at, message = body.get("at"), body.get("message")
    if not isinstance(at, int) or isinstance(at, bool) or not isinstance(message, dict):
        return None
    return at, message, body
