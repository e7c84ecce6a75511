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
from saihm.integrations._chat import chat_entry

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
