"""OpenAI Agents SDK sessions over a SAIHM operator (``pip install 'saihm[openai-agents]'``).

:class:`SaihmSession` implements the SDK's ``agents.memory.Session`` protocol
(``session_id``, ``get_items``, ``add_items``, ``pop_item``, ``clear_session``), so
``Runner.run(agent, text, session=SaihmSession(...))`` keeps the conversation in SAIHM.

Each item (a JSON object: a message, a function call, its output, ...) is one entry of the
host's record (``saihm_record`` kind ``said``): its content is the item's text (``"user:
hello"``; ``"assistant: (function_call)"`` for an item without text), what recall, the
person's page and MCP show, and its ``metadata``
``{"saihm-agents": 1, "session": session_id, "at": <time_ns>, "message": item}`` (an entry an
earlier version wrote with that object as its content is still read); the record
fits a conversation (an append-only, hash-chained account of what was said and done) and is
kept apart from the memory cells an agent recalls. ``get_items`` recalls the entries of this
``session_id``, oldest first (the latest ``limit`` when given); ``pop_item`` erases the newest
(``saihm_forget``, a FORGET receipt) and returns it; ``clear_session`` erases every entry of the
session. Nothing is edited in place. Cells in another form, or another holder's, are never read
as items, and several ``session_id`` values over one token read only their own entries.

It holds an endpoint and an ``Authorization`` value (hidden from ``repr``), never a key; or,
given ``admin=`` (a :class:`saihm.client.Admin`) and ``holder_id=`` or ``user_id=`` instead of
``auth_header``, each ``session_id`` is its own SAIHM session opened (or renewed) through the
authority service (:mod:`saihm.integrations.identity`).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from saihm.integrations import require
from saihm.integrations._chat import chat_entry, entry_text

require("agents", "openai-agents")

from pydantic import SecretStr  # noqa: E402

from saihm.client import AsyncClient  # noqa: E402
from saihm.integrations.identity import resolve_auth  # noqa: E402

#: The SDK's ``TResponseInputItem``: a JSON object (a TypedDict of the Responses API).
TResponseInputItem = dict[str, Any]

__all__ = ["SaihmSession"]

CHAT_MARK = "saihm-agents"

_clock = threading.Lock()
_last_at = 0


def _stamp() -> int:
    """A nanosecond time strictly after the previous one in this process (keeps the order of
    items added together)."""
    global _last_at
    with _clock:
        _last_at = max(time.time_ns(), _last_at + 1)
        return _last_at


class SaihmSession:
    """An Agents SDK ``Session`` kept as the host's record in SAIHM (see the module)."""

    session_settings: Any = None

    def __init__(
        self,
        session_id: str,
        endpoint: str,
        auth_header: str | None = None,
        *,
        ca_file: str | None = None,
        tls_pin_sha256: str | None = None,
        session_settings: Any = None,
        **identity: Any,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be a non-empty string")
        if identity.get("admin") is not None:
            identity["session_id"] = session_id
        self.session_id = session_id
        self.session_settings = session_settings
        auth = resolve_auth(auth_header, identity)
        self._endpoint = endpoint
        self._auth = SecretStr(auth)
        self._kwargs: dict[str, Any] = {"ca_file": ca_file, "tls_pin_sha256": tls_pin_sha256}
        # Checks the endpoint and the Authorization value now.
        AsyncClient(endpoint, auth, **self._kwargs)

    def __repr__(self) -> str:
        return f"SaihmSession({self.session_id!r})"

    def _client(self) -> AsyncClient:
        return AsyncClient(self._endpoint, self._auth.get_secret_value(), **self._kwargs)

    async def _entries(self, client: AsyncClient) -> list[tuple[int, str, dict[str, Any]]]:
        found = []
        for cell in await client.recall(kinds=["said"]):
            entry = chat_entry(cell, CHAT_MARK)
            if entry is not None and entry[2].get("session") == self.session_id:
                found.append((entry[0], cell.cell_id, entry[1]))
        return sorted(found, key=lambda e: (e[0], e[1]))

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; the latest ``limit`` when given."""
        async with self._client() as client:
            items = [item for _, _, item in await self._entries(client)]
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Record ``items`` in order (one ``saihm_record`` ``said`` entry each)."""
        entries = []
        for item in items:
            if not isinstance(item, dict):
                raise ValueError("an Agents SDK session item must be a JSON object")
            body = {CHAT_MARK: 1, "session": self.session_id, "at": _stamp(), "message": item}
            try:
                json.dumps(body, allow_nan=False)
            except (TypeError, ValueError) as err:
                raise ValueError("an Agents SDK session item must be JSON") from err
            role = item.get("role") or ("tool" if "output" in item else "assistant")
            entries.append((entry_text(role, item, item.get("type") or "item"), body))
        if not entries:
            return
        async with self._client() as client:
            for text, body in entries:
                await client.record("said", text, metadata=body)

    async def pop_item(self) -> TResponseInputItem | None:
        """Erase the newest item and return it; None when the session is empty."""
        async with self._client() as client:
            entries = await self._entries(client)
            if not entries:
                return None
            _, cell_id, item = entries[-1]
            await client.forget(cell_id)
        return item

    async def clear_session(self) -> None:
        """Erase every item of the session (``saihm_forget`` each)."""
        async with self._client() as client:
            for _, cell_id, _ in await self._entries(client):
                await client.forget(cell_id)
