"""saihm/integrations/_chat.py: the one reader of the chat entries that the LangChain history
and the LlamaIndex memory write into the record; whatever is not such an entry is not a
message (docs/integrations.md, "Framework adapters")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saihm.client import RecalledCell
from saihm.integrations._chat import chat_entry, entry_text, message_text

MARK = "saihm-test"
CELL_ID = "ab" * 32


def _cell(content: Any, *, kind: str = "said", shared: bool = False) -> RecalledCell:
    text = content if isinstance(content, str) else json.dumps(content)
    return RecalledCell.model_validate(
        {"cellId": CELL_ID, "plaintext": text, "kind": kind, "sharedByOtherHolder": shared}
    )


def test_an_entry_written_under_the_mark_is_read_back() -> None:
    body = {MARK: 1, "at": 7, "message": {"role": "user"}, "chat": "c"}
    assert chat_entry(_cell(body), MARK) == (7, {"role": "user"}, body)


@pytest.mark.parametrize(
    ("content", "kind", "shared"),
    [
        ({MARK: 1, "at": 7, "message": {}}, "did", False),  # another kind
        ({MARK: 1, "at": 7, "message": {}}, "said", True),  # another holder's cell
        ({"other-mark": 1, "at": 7, "message": {}}, "said", False),
        ({MARK: 2, "at": 7, "message": {}}, "said", False),
        ({MARK: 1, "at": True, "message": {}}, "said", False),  # a bool is not a time
        ({MARK: 1, "at": 7.5, "message": {}}, "said", False),
        ({MARK: 1, "message": {}}, "said", False),
        ({MARK: 1, "at": 7, "message": "text"}, "said", False),
        ([MARK, 1], "said", False),
        ("not json {", "said", False),
    ],
)
def test_anything_else_is_not_a_message(content: Any, kind: str, shared: bool) -> None:
    assert chat_entry(_cell(content, kind=kind, shared=shared), MARK) is None


@given(st.text(max_size=80))
def test_any_plaintext_is_an_entry_or_none_never_an_exception(text: str) -> None:
    entry = chat_entry(_cell(text), MARK)
    assert entry is None or (isinstance(entry[0], int) and isinstance(entry[1], dict))


def _with_metadata(text: str, metadata: Any, **extra: Any) -> RecalledCell:
    fields = {"cellId": CELL_ID, "plaintext": text, "kind": "said", "metadata": metadata}
    return RecalledCell.model_validate({"sharedByOtherHolder": False, **fields, **extra})


def test_an_entry_is_read_from_its_metadata_and_its_text_is_only_text() -> None:
    body = {MARK: 1, "at": 7, "message": {"role": "user", "content": "hello"}}
    assert chat_entry(_with_metadata("user: hello", body), MARK) == (7, body["message"], body)
    # With metadata present, a text that looks like an entry is not read as one.
    other = {"other-mark": 1}
    assert chat_entry(_with_metadata(json.dumps(body), other), MARK) is None


@pytest.mark.parametrize(
    ("role", "message", "what", "text"),
    [
        ("human", "I like green tea", None, "human: I like green tea"),
        ("ai", [{"type": "text", "text": "Noted"}, {"type": "image"}], None, "ai: Noted"),
        ("user", [{"block_type": "text", "text": "a"}, {"text": "b"}], None, "user: a\nb"),
        (
            "assistant",
            {"type": "message", "content": [{"type": "output_text", "text": "hi"}]},
            None,
            "assistant: hi",
        ),
        ("tool", {"type": "function_call_output", "output": "21 C"}, None, "tool: 21 C"),
        (
            "assistant",
            {"type": "function_call", "name": "weather"},
            "function_call",
            "assistant: (function_call)",
        ),
        (None, "", None, "message: (no text)"),
    ],
)
def test_an_entry_text_is_the_speaker_and_what_was_said(role, message, what, text) -> None:
    assert entry_text(role, message, what) == text


@given(
    st.recursive(
        st.none() | st.text(max_size=5) | st.integers(),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["text", "content", "x"]), inner, max_size=3)
        ),
        max_leaves=8,
    )
)
def test_entry_text_is_never_blank_and_message_text_never_raises(message: Any) -> None:
    assert isinstance(message_text(message), str)
    assert entry_text("user", message).strip()
