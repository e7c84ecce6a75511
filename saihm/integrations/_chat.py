"""The chat entries the adapters write into the host's record, read back strictly.

An adapter that keeps a chat as the record (docs/integrations.md, "Framework adapters")
writes each message as one ``saihm_record`` entry of kind ``said`` whose content is a JSON
object carrying the adapter's mark (``{MARK: 1, "at": <time_ns>, "message": {...}, ...}``).
Reading the chat back, anything else is not a message: another kind, another holder's cell,
text that is not such an object, a missing or non-integer time, or a message that is not an
object.
"""

from __future__ import annotations

import json
from typing import Any

from saihm.client import RecalledCell

__all__ = ["chat_entry"]


def chat_entry(cell: RecalledCell, mark: str) -> tuple[int, dict[str, Any], dict[str, Any]] | None:
    """``(at, message, whole body)`` of a chat entry written under ``mark``, else None."""
    if cell.kind != "said" or cell.shared_by_other_holder:
        return None
    try:
        body = json.loads(cell.plaintext)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get(mark) != 1:
        return None
    at, message = body.get("at"), body.get("message")
    if not isinstance(at, int) or isinstance(at, bool) or not isinstance(message, dict):
        return None
    return at, message, body
