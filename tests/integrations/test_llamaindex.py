"""SaihmMemory (LlamaIndex ``BaseMemory``) end to end against a real ``saihm serve``.

llama-index-core publishes no test suite for memory implementations; the cases are the
documented ``BaseMemory`` behaviour as its own ChatMemoryBuffer tests state it
(llama-index-core/tests/memory/test_chat_memory_buffer.py: put/get, set, get_all, order,
to_dict/from_dict and string save/load, pickle), minus the token limit (which needs a
tokenizer download), plus SAIHM's rules: set is supersede (both logged), the credential never
shows, foreign cells are never messages.
"""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.optional import require_module

require_module("llama_index.core", "llamaindex")

from llama_index.core.llms import ChatMessage, MessageRole

from saihm.client import Client
from saihm.integrations.llamaindex import SaihmMemory
from tests.support.serve import fetch, holder_create, serving

USER = ChatMessage(role=MessageRole.USER, content="first message")
SECOND_USER = ChatMessage(role=MessageRole.USER, content="second message")
ASSISTANT = ChatMessage(role=MessageRole.ASSISTANT, content="first answer")


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("li")
    data = tmp / "data"
    with serving(tmp, "--data", str(data)) as (_, url):
        yield url, data


@pytest.fixture
def holder(served) -> tuple[str, str]:
    url, data = served
    return url, f"Bearer {holder_create(data)['token']}"


def test_put_get_in_order(holder) -> None:
    url, auth = holder
    memory = SaihmMemory.from_defaults(endpoint=url, auth_header=auth, chat_history=[USER])
    history = memory.get()
    assert [m.content for m in history] == ["first message"]
    memory.put(ASSISTANT)
    memory.put_messages([SECOND_USER, ChatMessage(role="assistant", content="second answer")])
    got = SaihmMemory(endpoint=url, auth_header=auth).get_all()  # read back, not cached
    assert [(m.role.value, m.content) for m in got] == [
        ("user", "first message"),
        ("assistant", "first answer"),
        ("user", "second message"),
        ("assistant", "second answer"),
    ]
    assert got[0] == USER
    limited = SaihmMemory(endpoint=url, auth_header=auth, message_limit=2)
    assert [m.content for m in limited.get()] == ["second message", "second answer"]
    assert len(limited.get_all()) == 4


def test_each_message_is_stored_as_its_text(holder) -> None:
    url, auth = holder
    memory = SaihmMemory(endpoint=url, auth_header=auth, chat_key="as-text")
    memory.put_messages([USER, ASSISTANT])
    with Client(url, auth) as client:
        cells = client.recall(kinds=["said"])
    assert [c.plaintext for c in cells] == ["user: first message", "assistant: first answer"]
    assert all(c.metadata and c.metadata["chat"] == "as-text" for c in cells)
    assert [m.content for m in memory.get_all()] == ["first message", "first answer"]


def test_set_supersedes_and_both_steps_are_logged(holder) -> None:
    url, auth = holder
    memory = SaihmMemory(endpoint=url, auth_header=auth)
    memory.put_messages([USER, ASSISTANT])
    with Client(url, auth) as client:
        old = {c.cell_id for c in client.recall(kinds=["said"])}
        holder_id = client.status().agent_id_hash_hex
        memory.set([SECOND_USER])
        assert [m.content for m in memory.get()] == ["second message"]
        new = {c.cell_id for c in client.recall(kinds=["said"])}
    assert len(old) == 2 and len(new) == 1 and not old & new
    _, raw = fetch(url + f"log/v1/receipts?holderId={holder_id}&limit=1000")
    ops = [
        (e["receipt"]["operation"], e["receipt"]["subjectId"]) for e in json.loads(raw)["receipts"]
    ]
    tail = [op for op, _ in ops if op in ("REMEMBER", "FORGET")][-3:]
    assert tail == ["REMEMBER", "FORGET", "FORGET"]  # record the new, then forget the old
    assert {s for op, s in ops if op == "FORGET"} == old
    _, raw = fetch(url + "log/v1/erasures")
    assert old <= set(json.loads(raw)["cellIds"])
    memory.reset()
    assert memory.get_all() == []


def test_async_methods_and_separate_chats(holder) -> None:
    url, auth = holder
    one = SaihmMemory(endpoint=url, auth_header=auth, chat_key="one")
    two = SaihmMemory(endpoint=url, auth_header=auth, chat_key="two")

    async def run() -> None:
        await one.aput(USER)
        await two.aput_messages([ASSISTANT, SECOND_USER])
        assert [m.content for m in await one.aget()] == ["first message"]
        assert len(await two.aget_all()) == 2
        await two.aset([USER])
        assert [m.content for m in await two.aget()] == ["first message"]
        await one.areset()

    asyncio.run(run())
    assert one.get_all() == [] and [m.content for m in two.get()] == ["first message"]


def test_foreign_cells_are_never_messages(holder) -> None:
    url, auth = holder
    message = USER.model_dump(mode="json")
    with Client(url, auth) as client:
        body = {"saihm-llama": 1, "chat": "chat_history", "at": 1, "message": message}
        client.remember(json.dumps(body))  # a memory, not the record
        client.record("said", json.dumps({**body, "chat": "other"}))
        client.record("said", json.dumps({**body, "message": {"role": 7}}))
        client.record("said", "saihm-llama but not JSON")
    memory = SaihmMemory(endpoint=url, auth_header=auth)
    assert memory.get_all() == []
    memory.reset()  # erases nothing that is not its own
    with Client(url, auth) as client:
        assert len(client.recall()) == 4


def test_saved_forms_leave_the_credential_out(holder) -> None:
    url, auth = holder
    token = auth.split()[1]
    memory = SaihmMemory(endpoint=url, auth_header=auth, message_limit=5)
    memory.put(USER)
    for text in (repr(memory), str(memory), memory.to_json(), json.dumps(memory.to_dict())):
        assert token not in text
    loaded = SaihmMemory.from_dict(memory.to_dict(), auth_header=auth)
    assert loaded.message_limit == 5 and [m.content for m in loaded.get()] == ["first message"]
    again = SaihmMemory.from_json(memory.to_json(), auth_header=auth)
    assert again.get() == loaded.get()
    assert pickle.loads(pickle.dumps(memory)).get() == loaded.get()


def test_a_memory_block_keeps_what_memory_flushes_and_recalls_it(holder) -> None:
    """llama-index's own ``Memory`` with a SaihmMemoryBlock: messages flushed out of the
    short-term window become memory cells; a later question brings the matching ones back
    into the system message, from a new Memory (a new short-term store)."""
    from llama_index.core.memory import Memory

    from saihm.integrations.llamaindex import SaihmMemoryBlock

    url, auth = holder

    def words(text: str) -> list[str]:  # a tokenizer that needs no download
        return text.split()

    def memory() -> Memory:
        block = SaihmMemoryBlock(endpoint=url, auth_header=auth, top_k=2)
        return Memory.from_defaults(
            token_limit=40,
            chat_history_token_ratio=0.5,
            token_flush_size=10,
            memory_blocks=[block],
            tokenizer_fn=words,
        )

    first = memory()
    first.put_messages(
        [
            ChatMessage(role="user", content="my favourite tea is jasmine from Fujian"),
            ChatMessage(role="assistant", content="noted, jasmine tea from Fujian it is"),
        ]
        + [ChatMessage(role="user", content=f"filler message number {i} here") for i in range(8)]
    )
    first.get()  # Memory flushes the oldest messages into its blocks when it reads
    with Client(url, auth) as client:
        stored = [c.plaintext for c in client.recall(kinds=["memory"])]
    assert "user: my favourite tea is jasmine from Fujian" in stored
    second = memory()
    second.put(ChatMessage(role="user", content="which tea do I like?"))
    got = second.get()
    assert got[0].role.value == "system"
    assert "jasmine" in str(got[0].content)
    assert auth.split()[1] not in second.model_dump_json()
    block = SaihmMemoryBlock(endpoint=url, auth_header=auth)
    assert asyncio.run(block.aget([])) == ""
    assert asyncio.run(block.aget([ChatMessage(role="user", content="zebra")])) == ""
