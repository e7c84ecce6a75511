"""LangChain over a SAIHM operator (``pip install 'saihm[langchain]'``): a retriever and a
chat-message history.

:class:`SaihmRetriever` is a ``langchain_core.retrievers.BaseRetriever``: ``invoke(query)``
calls ``saihm_recall`` with ``query`` (the operator's keyword filter over the plaintext) and
returns one ``Document`` per cell, ``page_content`` = plaintext, ``metadata`` = ``cell_id``,
``kind``, ``namespace``, ``session_id``, ``timestamp``, ``shared_by_other_holder`` and
``score`` (the operator's relevance for the query, higher is more relevant). Cells of
the host's record (kind said/did/end) are left out unless ``include_records``. The number of
results is ``k`` (constructor or ``invoke(query, k=n)``). It holds an endpoint and an
``Authorization`` value (a secret, hidden from ``repr``), never a key; every read is a RECALL
receipt at the operator. Tested with ``langchain-tests``' ``RetrieversIntegrationTests``.

:class:`SaihmChatMessageHistory` is a ``BaseChatMessageHistory``: each added message is the
host's record (``saihm_record`` kind ``said``) of the session the token opens: its content is
the message's text (``"human: hello"``, what recall, the person's page and MCP show) and its
``metadata`` ``{"saihm-chat": 1, "at": <ns>, "message": message_to_dict(m)}``; ``messages``
recalls the session's ``said`` cells in that form (or, written by an earlier version, with
that object as the content), oldest first; ``clear()`` erases them (``saihm_forget``
each, a FORGET receipt per message). Other cells and records are never read as messages.
Given ``admin=``, ``session_id=`` and ``holder_id=`` or ``user_id=`` instead of a token, the
history opens (or renews) that session through the authority service
(:mod:`saihm.integrations.identity`): two session_ids are two histories.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from saihm.integrations import require
from saihm.integrations._chat import chat_entry, entry_text

require("langchain_core", "langchain")

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    BaseMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import Field, SecretStr  # noqa: E402

from saihm.client import AsyncClient, Client, RecalledCell  # noqa: E402
from saihm.integrations.identity import resolve_auth  # noqa: E402

__all__ = ["SaihmChatMessageHistory", "SaihmRetriever"]

CHAT_MARK = "saihm-chat"


def _document(cell: RecalledCell) -> Document:
    metadata = {
        "cell_id": cell.cell_id,
        "kind": cell.kind or "memory",
        "namespace": cell.namespace,
        "session_id": cell.session_id,
        "timestamp": cell.timestamp,
        "shared_by_other_holder": cell.shared_by_other_holder,
        # The operator's relevance for the query (higher is more relevant).
        "score": cell.score,
    }
    return Document(page_content=cell.plaintext, metadata=metadata, id=cell.cell_id)


class SaihmRetriever(BaseRetriever):
    """Recall from a SAIHM operator as LangChain ``Document`` objects (see the module)."""

    endpoint: str
    auth_header: SecretStr
    k: int = Field(default=4, ge=1)
    include_records: bool = False
    ca_file: str | None = None
    tls_pin_sha256: str | None = None

    def _client_args(self) -> tuple[tuple[str, str], dict[str, Any]]:
        kwargs = {"ca_file": self.ca_file, "tls_pin_sha256": self.tls_pin_sha256}
        return (self.endpoint, self.auth_header.get_secret_value()), kwargs

    def _select(self, cells: list[RecalledCell], k: int | None) -> list[Document]:
        kept = [c for c in cells if self.include_records or not c.is_record]
        return [_document(c) for c in kept[: k or self.k]]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        args, kwargs = self._client_args()
        with Client(*args, **kwargs) as client:
            return self._select(client.recall(query or None), k)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> list[Document]:
        args, kwargs = self._client_args()
        async with AsyncClient(*args, **kwargs) as client:
            return self._select(await client.recall(query or None), k)


def _chat_entry(cell: RecalledCell) -> tuple[int, dict[str, Any]] | None:
    """(ordering stamp, message dict) of a cell this history wrote, else None."""
    entry = chat_entry(cell, CHAT_MARK)
    return None if entry is None else entry[:2]


class SaihmChatMessageHistory(BaseChatMessageHistory):
    """Chat messages as the host's record in one SAIHM session (see the module)."""

    def __init__(
        self,
        endpoint: str,
        auth_header: str | None = None,
        *,
        ca_file: str | None = None,
        tls_pin_sha256: str | None = None,
        **identity: Any,
    ) -> None:
        """``auth_header`` (a token's ``Authorization`` value), or ``admin=`` (a
        :class:`saihm.client.Admin`) with ``session_id=`` and ``holder_id=`` or ``user_id=``:
        the session's token then comes from the authority service
        (:mod:`saihm.integrations.identity`)."""
        auth = resolve_auth(auth_header, identity)
        self._endpoint = endpoint
        self._auth = SecretStr(auth)
        self._ca_file = ca_file
        self._pin = tls_pin_sha256

    def __repr__(self) -> str:
        return "SaihmChatMessageHistory(...)"

    def _client(self) -> Client:
        return Client(
            self._endpoint,
            self._auth.get_secret_value(),
            ca_file=self._ca_file,
            tls_pin_sha256=self._pin,
        )

    def _entries(self, client: Client) -> list[tuple[int, str, dict[str, Any]]]:
        found = []
        for cell in client.recall(kinds=["said"]):
            entry = _chat_entry(cell)
            if entry is not None:
                found.append((entry[0], cell.cell_id, entry[1]))
        return sorted(found, key=lambda e: (e[0], e[1]))

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's chat messages, oldest first (one ``saihm_recall``)."""
        with self._client() as client:
            return messages_from_dict([m for _, _, m in self._entries(client)])

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` as ``saihm_record`` ``said`` cells, in order."""
        with self._client() as client:
            for message in messages:
                as_dict = message_to_dict(message)
                body = {CHAT_MARK: 1, "at": time.time_ns(), "message": as_dict}
                data = as_dict.get("data") or {}
                text = entry_text(as_dict.get("type"), data.get("content"), "tool call")
                client.record("said", text, metadata=body)

    def clear(self) -> None:
        """Erase every chat message of this history (``saihm_forget`` each)."""
        with self._client() as client:
            for _, cell_id, _ in self._entries(client):
                client.forget(cell_id)
