"""The OpenAI Agents SDK session (saihm.integrations.openai_agents) against a real ``saihm
serve``: the ``Session`` protocol's four methods, and the SDK's own ``Runner`` driving an agent
with the SDK's published deterministic model (``agents.testing.ScriptedModel``) over it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.optional import require_module

require_module("agents", "openai-agents")

from agents import Agent, Runner, set_tracing_disabled
from agents.memory import Session
from agents.testing import ScriptedModel, assistant_message

from saihm.client import Admin, Client, ClientError
from saihm.integrations.openai_agents import SaihmSession
from tests.support.serve import authority_serving, holder_create, serving


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """(data directory, operator url, a holder's Authorization value)."""
    tmp = tmp_path_factory.mktemp("agents")
    data = tmp / "data"
    with serving(tmp, "--data", str(data), "--rate-limit", "0") as (_, url):
        yield data, url, f"Bearer {holder_create(data)['token']}"


def _user(text: str) -> dict:
    return {"role": "user", "content": text}


def test_the_session_protocol_round_trips_in_order(site) -> None:
    _, url, auth = site
    session = SaihmSession("protocol", url, auth)
    assert isinstance(session, Session)

    async def run() -> None:
        assert await session.get_items() == []
        assert await session.pop_item() is None
        items = [_user("green tea"), {"role": "assistant", "content": "noted"}, _user("oolong")]
        await session.add_items(items[:2])
        await session.add_items(items[2:])
        await session.add_items([])
        assert await session.get_items() == items
        assert await session.get_items(limit=2) == items[1:]
        # Read back by a new object: stored, not cached.
        assert await SaihmSession("protocol", url, auth).get_items() == items
        assert await session.pop_item() == items[2]
        assert await session.get_items() == items[:2]
        await session.clear_session()
        assert await session.get_items() == []

    asyncio.run(run())
    assert auth.split()[1] not in repr(session)


def test_each_item_is_stored_as_its_text_and_read_back_exactly(site) -> None:
    _, url, auth = site
    session = SaihmSession("as-text", url, auth)
    items = [
        _user("what is the weather in Leeds?"),
        {"type": "function_call", "name": "weather", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "12 C and rain"},
        {
            "role": "assistant",
            "type": "message",
            "content": [{"type": "output_text", "text": "It is 12 C and raining."}],
        },
    ]
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.get_items()) == items
    with Client(url, auth) as client:
        mine = [
            c
            for c in client.recall(kinds=["said"])
            if (c.metadata or {}).get("session") == "as-text"
        ]
    assert [c.plaintext for c in mine] == [
        "user: what is the weather in Leeds?",
        "assistant: (function_call)",
        "tool: 12 C and rain",
        "assistant: It is 12 C and raining.",
    ]
    asyncio.run(session.clear_session())


def test_session_ids_over_one_token_are_separate_and_look_alikes_are_not_items(site) -> None:
    _, url, auth = site
    one, two = SaihmSession("one", url, auth), SaihmSession("two", url, auth)
    with Client(url, auth) as client:
        # A remembered look-alike, and a record entry in the form but not an object item.
        client.remember(json.dumps({"saihm-agents": 1, "session": "one", "at": 1, "message": {}}))
        bad = {"saihm-agents": 1, "session": "one", "at": 2, "message": "text"}
        client.record("said", json.dumps(bad))

    async def run() -> None:
        await one.add_items([_user("for one")])
        await two.add_items([_user("for two")])
        assert await one.get_items() == [_user("for one")]
        assert await two.get_items() == [_user("for two")]
        await one.clear_session()
        assert await two.get_items() == [_user("for two")]
        with pytest.raises(ValueError, match="JSON object"):
            await one.add_items(["not an object"])  # type: ignore[list-item]

    asyncio.run(run())


def test_the_sdk_runner_keeps_the_conversation_in_saihm(site) -> None:
    _, url, auth = site
    set_tracing_disabled(True)  # no OpenAI account here: nothing to export traces to
    model = ScriptedModel([[assistant_message("Green tea.")], [assistant_message("Oolong.")]])
    agent = Agent(name="tea", instructions="Answer briefly.", model=model)
    session = SaihmSession("runner", url, auth)
    first = Runner.run_sync(agent, "Which tea do I like?", session=session)
    assert first.final_output == "Green tea."
    # A new process would build a new session object: the second turn sees the first.
    second = Runner.run_sync(agent, "And on Fridays?", session=SaihmSession("runner", url, auth))
    assert second.final_output == "Oolong."
    sent = json.dumps(model.last_call.input if model.last_call else None)
    assert "Which tea do I like?" in sent and "Green tea." in sent
    items = asyncio.run(session.get_items())
    texts = json.dumps(items)
    order = [texts.find(t) for t in ("Which tea", "Green tea.", "And on Fridays", "Oolong.")]
    assert -1 not in order and order == sorted(order), order


def test_a_refused_token_is_an_error_quoting_no_credential(site) -> None:
    _, url, _ = site
    session = SaihmSession("x", url, "Bearer not-a-token-s3cret")
    with pytest.raises(ClientError) as caught:
        asyncio.run(session.get_items())
    assert "s3cret" not in str(caught.value)


def test_sessions_through_the_authority_service(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with (
        serving(tmp_path, "--data", str(data), "--rate-limit", "0") as (_, url),
        authority_serving(tmp_path, data, tmp_path / "authority") as (_, admin_url, credential),
        Admin(admin_url, credential) as admin,
    ):
        users: dict[str, str] = {}

        def session(session_id: str) -> SaihmSession:
            return SaihmSession(session_id, url, admin=admin, user_id="erin", users=users)

        async def run() -> None:
            await session("a").add_items([_user("in a")])
            assert await session("b").get_items() == []
            assert await session("a").get_items() == [_user("in a")]

        asyncio.run(run())
        assert len(users) == 1
        logs = "".join(p.read_text() for p in tmp_path.glob("*.out")) + "".join(
            p.read_text() for p in tmp_path.glob("*.err")
        )
        assert credential not in logs
