"""The LangChain adapters end to end against a real ``saihm serve`` (tests/support/serve.py);
langchain-tests' own retriever suite is in test_langchain_standard.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.optional import require_module

require_module("langchain_core", "langchain")

from saihm.client import Client
from saihm.integrations import require
from saihm.integrations.langchain import SaihmRetriever
from tests.support.serve import holder_create, serving


def test_recall_as_documents_leaves_the_host_record_out_unless_asked(operator) -> None:
    url, auth, teas = operator
    retriever = SaihmRetriever(endpoint=url, auth_header=auth, k=10)
    docs = retriever.invoke("tea")
    assert sorted(d.page_content for d in docs) == sorted(teas)
    assert {d.metadata["kind"] for d in docs} == {"memory"}
    assert all(len(d.metadata["cell_id"]) == 64 and d.id == d.metadata["cell_id"] for d in docs)
    # The operator's relevance for the query, in its order (most relevant first).
    scores = [d.metadata["score"] for d in docs]
    assert all(isinstance(s, float) and s > 0 for s in scores), scores
    assert scores == sorted(scores, reverse=True)
    with_record = SaihmRetriever(endpoint=url, auth_header=auth, k=10, include_records=True)
    kinds = {d.metadata["kind"] for d in with_record.invoke("tea")}
    assert kinds == {"memory", "said"}
    assert [d.page_content for d in retriever.invoke("coffee")] == ["coffee after lunch"]
    assert auth not in repr(retriever) and auth.split()[1] not in repr(retriever)


def test_a_refused_token_is_an_error_that_quotes_no_credential(operator) -> None:
    from saihm.client import ClientError

    url, _, _ = operator
    retriever = SaihmRetriever(endpoint=url, auth_header="Bearer not-a-token-s3cret")
    with pytest.raises(ClientError) as caught:
        retriever.invoke("tea")
    assert "s3cret" not in str(caught.value)


def test_an_absent_extra_is_one_line_naming_it() -> None:
    with pytest.raises(
        ImportError,
        match=r"^no_such_framework is not installed: pip install "
        r"'saihm\[nothing\]'$",
    ):
        require("no_such_framework", "nothing")
    code = "import sys; sys.modules['langchain_core'] = None; import saihm.integrations.langchain"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "pip install 'saihm[langchain]'" in done.stderr.strip().splitlines()[-1]


def test_chat_history_round_trips_in_order_and_clear_erases(tmp_path) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from saihm.integrations.langchain import SaihmChatMessageHistory

    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        auth = f"Bearer {holder_create(data)['token']}"
        history = SaihmChatMessageHistory(url, auth)
        with Client(url, auth) as client:
            client.remember('{"saihm-chat": 1, "at": 0, "message": "not mine"}')
        history.add_messages([HumanMessage("I like green tea"), AIMessage("Noted: green tea")])
        history.add_user_message("and oolong")
        got = history.messages
        assert [(type(m).__name__, m.content) for m in got] == [
            ("HumanMessage", "I like green tea"),
            ("AIMessage", "Noted: green tea"),
            ("HumanMessage", "and oolong"),
        ]
        assert SaihmChatMessageHistory(url, auth).messages == got  # read back, not cached
        history.clear()
        assert history.messages == []
        with Client(url, auth) as client:  # the remembered look-alike is untouched
            assert len(client.recall("saihm-chat")) == 1
        assert auth.split()[1] not in repr(history)


def test_chat_history_changes_are_logged_never_edited_in_place(tmp_path) -> None:
    """A chat history is never edited in place: adding is a new record entry (REMEMBER
    receipt), clearing erases each entry (FORGET receipt, listed in /log/v1/erasures)."""
    import json

    from langchain_core.messages import AIMessage, HumanMessage

    from saihm.integrations.langchain import SaihmChatMessageHistory
    from tests.support.serve import fetch

    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        auth = f"Bearer {holder_create(data)['token']}"
        history = SaihmChatMessageHistory(url, auth)
        history.add_messages([HumanMessage("tea?"), AIMessage("green")])
        with Client(url, auth) as client:
            cells = {c.cell_id for c in client.recall(kinds=["said"])}
            holder_id = client.status().agent_id_hash_hex
        history.clear()
        _, raw = fetch(url + f"log/v1/receipts?holderId={holder_id}&limit=1000")
        ops = [
            (e["receipt"]["operation"], e["receipt"]["subjectId"])
            for e in json.loads(raw)["receipts"]
        ]
        changes = [(op, s) for op, s in ops if op in ("REMEMBER", "FORGET")]
        assert [op for op, _ in changes] == ["REMEMBER", "REMEMBER", "FORGET", "FORGET"]
        assert {s for op, s in changes if op == "REMEMBER"} == cells
        assert {s for op, s in changes if op == "FORGET"} == cells
        _, raw = fetch(url + "log/v1/erasures")
        assert cells <= set(json.loads(raw)["cellIds"])
        assert history.messages == []


def test_chat_history_stores_each_message_as_its_text(tmp_path) -> None:
    """Recall, the person's page and MCP show a message's text, not the adapter's JSON; the
    message travels in metadata. Entries an earlier version wrote as JSON are still read."""
    import json

    from langchain_core.messages import AIMessage, HumanMessage

    from saihm.integrations.langchain import SaihmChatMessageHistory

    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        auth = f"Bearer {holder_create(data)['token']}"
        legacy = {
            "saihm-chat": 1,
            "at": 1,
            "message": {"type": "human", "data": {"content": "an old line", "type": "human"}},
        }
        with Client(url, auth) as client:
            client.record("said", json.dumps(legacy))
        history = SaihmChatMessageHistory(url, auth)
        history.add_messages([HumanMessage("I like green tea"), AIMessage("Noted: green tea")])
        with Client(url, auth) as client:
            texts = [c.plaintext for c in client.recall(kinds=["said"])]
            ranked = client.recall("saihm-chat")
        assert texts[1:] == ["human: I like green tea", "ai: Noted: green tea"]
        # Only the old JSON entry holds the mark as text: it alone matches it.
        assert ranked[0].plaintext == json.dumps(legacy)
        assert all("saihm" not in text for text in texts[1:])
        assert [m.content for m in history.messages] == [
            "an old line",
            "I like green tea",
            "Noted: green tea",
        ]
