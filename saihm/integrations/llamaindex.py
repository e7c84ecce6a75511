"""LlamaIndex memory over a SAIHM operator (``pip install 'saihm[llamaindex]'``): a chat
memory and a long-term memory block.

:class:`SaihmMemory` is a ``llama_index.core.memory.BaseMemory`` (llama-index-core 0.14):
the chat is the host's record of the session the token opens, each message one
``saihm_record`` entry of kind ``said`` whose content is the message's text (``"user:
hello"``, what recall, the person's page and MCP show) and whose ``metadata`` is
``{"saihm-llama": 1, "chat": CHAT_KEY, "at": <time_ns>, "message": ChatMessage JSON}``
(an entry an earlier version wrote with that object as its content is still read).

- ``put``/``put_messages`` append entries; ``get`` returns the chat oldest first (the last
  ``message_limit`` messages when set), ``get_all`` all of it; one ``saihm_recall`` each.
- ``set(messages)`` supersedes the chat: the new messages are recorded, then every earlier
  message is erased with ``saihm_forget``; each step has its own receipt in the public log,
  and nothing is edited in place (recording first, so a refused write loses nothing).
- ``reset()`` erases every message of the chat (a FORGET receipt each).
- Async methods are BaseMemory's (the sync ones in a worker thread).
- Several chats can share one token: each ``chat_key`` reads only its own entries, and no
  cell in another form, nor another holder's, is ever read as a message.

:class:`SaihmMemoryBlock` is a ``BaseMemoryBlock[str]`` for llama-index's ``Memory``: the
messages ``Memory`` flushes out of its short-term window are remembered as memory cells
(``saihm_remember``, ``"role: text"``, in ``namespace``); reading the block recalls the
``top_k`` memories the operator ranks highest for the latest message's text and renders them as
lines of text for the prompt.

Both hold an endpoint and an ``Authorization`` value (a ``SecretStr``, hidden from ``repr``
and left out of ``to_dict``/``to_json``: pass ``auth_header=`` again to ``from_dict``), never
a key; or ``admin=`` with ``session_id=`` and ``holder_id=`` or ``user_id=`` in place of
``auth_header``, which opens (or renews) that session through the authority service
(:mod:`saihm.integrations.identity`). A session token sees one session; a grant token
(``saihm grant --sessions all``) sees every session's chats but writes into its own new
session.
"""

from __future__ import annotations

import time
from typing import Any

from saihm.integrations import require
from saihm.integrations._chat import chat_entry, entry_text

require("llama_index.core", "llamaindex")

from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from llama_index.core.memory.memory import BaseMemoryBlock  # noqa: E402
from llama_index.core.memory.types import BaseMemory  # noqa: E402
from pydantic import Field, SecretStr, ValidationError, model_validator  # noqa: E402

from saihm.client import AsyncClient, Client, RecalledCell  # noqa: E402
from saihm.integrations.identity import IDENTITY_ARGS, take_identity  # noqa: E402

__all__ = ["SaihmMemory", "SaihmMemoryBlock"]

CHAT_MARK = "saihm-llama"


def _entry(cell: RecalledCell, chat_key: str) -> tuple[int, str, ChatMessage] | None:
    """(time, cellId, message) of a cell this memory wrote for ``chat_key``, else None."""
    entry = chat_entry(cell, CHAT_MARK)
    if entry is None:
        return None
    at, message, body = entry
    if body.get("chat") != chat_key:
        return None
    try:
        return at, cell.cell_id, ChatMessage.model_validate(message)
    except ValidationError:
        return None


def _through_authority(data: Any) -> Any:
    """Constructor arguments with ``admin=`` (and ``session_id=``, ``holder_id=`` or
    ``user_id=``, ...) turned into ``auth_header`` (:mod:`saihm.integrations.identity`)."""
    if not isinstance(data, dict) or not any(name in data for name in IDENTITY_ARGS):
        return data
    data = dict(data)
    auth = take_identity(data)
    if auth is not None:
        data["auth_header"] = auth
    return data


class SaihmMemory(BaseMemory):
    """A LlamaIndex chat memory kept as the host's record in SAIHM (see the module)."""

    endpoint: str
    auth_header: SecretStr = Field(exclude=True, repr=False)
    chat_key: str = Field(default="chat_history", min_length=1)
    message_limit: int | None = Field(default=None, ge=1)
    ca_file: str | None = None
    tls_pin_sha256: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _identity(cls, data: Any) -> Any:
        return _through_authority(data)

    @classmethod
    def class_name(cls) -> str:
        """The LlamaIndex component name."""
        return "SaihmMemory"

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> SaihmMemory:
        """``SaihmMemory(**kwargs)``; ``chat_history=[...]`` is recorded first, as
        ``put_messages``, and ``llm`` is accepted and unused (BaseChatStoreMemory's shape)."""
        history = kwargs.pop("chat_history", None)
        kwargs.pop("llm", None)
        memory = cls(**kwargs)
        if history:
            memory.put_messages(list(history))
        return memory

    def _client(self) -> Client:
        return Client(
            self.endpoint,
            self.auth_header.get_secret_value(),
            ca_file=self.ca_file,
            tls_pin_sha256=self.tls_pin_sha256,
        )

    def _entries(self, client: Client) -> list[tuple[int, str, ChatMessage]]:
        found = []
        for cell in client.recall(kinds=["said"]):
            entry = _entry(cell, self.chat_key)
            if entry is not None:
                found.append(entry)
        return sorted(found, key=lambda e: (e[0], e[1]))

    def _record(self, client: Client, messages: list[ChatMessage]) -> None:
        for message in messages:
            dumped = message.model_dump(mode="json")
            body = {CHAT_MARK: 1, "chat": self.chat_key, "at": time.time_ns(), "message": dumped}
            text = entry_text(dumped.get("role"), dumped.get("blocks"), "no text")
            client.record("said", text, metadata=body)

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The chat, oldest first; only the last ``message_limit`` messages when set.
        ``input`` is accepted for the interface and does not filter."""
        messages = self.get_all()
        if self.message_limit is not None:
            messages = messages[-self.message_limit :]
        return messages

    def get_all(self) -> list[ChatMessage]:
        """Every message of the chat, oldest first (one ``saihm_recall``)."""
        with self._client() as client:
            return [m for _, _, m in self._entries(client)]

    def put(self, message: ChatMessage) -> None:
        """Append ``message`` (one ``saihm_record``)."""
        self.put_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Append ``messages`` in order (one ``saihm_record`` each)."""
        with self._client() as client:
            self._record(client, list(messages))

    def set(self, messages: list[ChatMessage]) -> None:
        """Supersede the chat with ``messages``: record them, then forget every earlier one."""
        with self._client() as client:
            old = self._entries(client)
            self._record(client, list(messages))
            for _, cell_id, _ in old:
                client.forget(cell_id)

    def reset(self) -> None:
        """Erase every message of the chat (``saihm_forget`` each)."""
        with self._client() as client:
            for _, cell_id, _ in self._entries(client):
                client.forget(cell_id)


class SaihmMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory for llama-index's ``Memory``, kept as SAIHM memory cells (see the
    module): ``Memory.from_defaults(memory_blocks=[SaihmMemoryBlock(endpoint=...,
    auth_header=...)])``."""

    name: str = "SaihmMemory"
    description: str | None = "Memories recalled from a SAIHM operator."
    endpoint: str
    auth_header: SecretStr = Field(exclude=True, repr=False)
    namespace: str = Field(default="memory", min_length=1, max_length=256)
    top_k: int = Field(default=5, ge=1)
    ca_file: str | None = None
    tls_pin_sha256: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _identity(cls, data: Any) -> Any:
        return _through_authority(data)

    def _client(self) -> AsyncClient:
        return AsyncClient(
            self.endpoint,
            self.auth_header.get_secret_value(),
            ca_file=self.ca_file,
            tls_pin_sha256=self.tls_pin_sha256,
        )

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The ``top_k`` memories of ``namespace`` the operator ranks highest for the text of
        the latest message, one ``- text`` line each (a cell of an accepted share from another
        holder marked so); "" when there is no text or no match."""
        texts = [m.content for m in messages or [] if isinstance(m.content, str) and m.content]
        if not texts or not texts[-1].split():
            return ""
        async with self._client() as client:
            cells = await client.recall(
                texts[-1], namespaces=[self.namespace], kinds=["memory"], limit=self.top_k
            )
        return "\n".join(
            f"- {c.plaintext}" + (" (shared by another holder)" if c.shared_by_other_holder else "")
            for c in cells
        )

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Remember each message with text as one memory cell, ``"role: text"``."""
        async with self._client() as client:
            for message in messages:
                text = message.content
                if isinstance(text, str) and text.strip():
                    content = f"{message.role.value}: {text}"
                    await client.remember(content, namespace=self.namespace)
