"""Adapters given ``admin=`` take a session or a user through the authority service (issue 25
item 5), against two real processes: ``saihm serve`` and ``saihm authority serve``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from saihm.client import Admin, ClientError
from saihm.integrations.identity import session_auth
from tests.support.optional import require_module
from tests.support.serve import authority_serving, serving


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str, str]]:
    """(tmp, operator url, authority url, admin credential)."""
    tmp = tmp_path_factory.mktemp("identity")
    data = tmp / "data"
    with (
        serving(tmp, "--data", str(data), "--rate-limit", "0") as (_, url),
        authority_serving(tmp, data, tmp / "authority") as (_, admin_url, credential),
    ):
        yield tmp, url, admin_url, credential


def _logs(tmp: Path) -> str:
    return "".join(
        (tmp / f"{name}.{ext}").read_text()
        for name in ("serve", "authority")
        for ext in ("out", "err")
    )


def test_chat_history_session_ids_are_separate_histories_kept_across_objects(both) -> None:
    require_module("langchain_core", "langchain")
    from langchain_core.messages import AIMessage, HumanMessage

    from saihm.integrations.langchain import SaihmChatMessageHistory

    tmp, url, admin_url, credential = both
    users: dict[str, str] = {}
    sessions: dict[str, str] = {}
    with Admin(admin_url, credential) as admin:

        def history(session_id: str) -> SaihmChatMessageHistory:
            return SaihmChatMessageHistory(
                url,
                admin=admin,
                user_id="alice",
                session_id=session_id,
                users=users,
                sessions=sessions,
            )

        first, second = history("chat-1"), history("chat-2")
        first.add_messages([HumanMessage("green tea"), AIMessage("noted")])
        second.add_user_message("coffee")
        assert [m.content for m in first.messages] == ["green tea", "noted"]
        assert [m.content for m in second.messages] == ["coffee"]
        # One holder for the user; two sessions; the maps hold ids, never a token.
        assert len(users) == 1 and len(sessions) == 2
        assert len(set(sessions.values())) == 2
        # A later object for the same session_id renews the same session: same history.
        assert [m.content for m in history("chat-1").messages] == ["green tea", "noted"]
        assert len(users) == 1 and len(sessions) == 2
        # By holder id, with the default in-memory maps: a new session, then the same one.
        holder = users["alice"]
        by_holder = SaihmChatMessageHistory(url, admin=admin, holder_id=holder, session_id="x")
        assert by_holder.messages == []
        by_holder.add_user_message("oolong")
        again = SaihmChatMessageHistory(url, admin=admin, holder_id=holder, session_id="x")
        assert [m.content for m in again.messages] == ["oolong"]
    assert credential not in repr(first) and credential not in _logs(tmp)


def test_a_wrong_credential_is_a_clear_error_naming_no_secret(both) -> None:
    require_module("langchain_core", "langchain")
    from saihm.integrations.langchain import SaihmChatMessageHistory

    tmp, url, admin_url, credential = both
    wrong = "s3cret-" + credential[::-1]
    with Admin(admin_url, wrong) as admin, pytest.raises(ClientError) as caught:
        SaihmChatMessageHistory(url, admin=admin, user_id="bob", session_id="a")
    assert caught.value.code == "unauthenticated"
    said = str(caught.value) + repr(caught.value)
    assert wrong not in said and credential not in said
    assert wrong not in _logs(tmp) and credential not in _logs(tmp)


def test_identity_arguments_are_checked_before_any_call(both) -> None:
    _, _, admin_url, credential = both
    with Admin(admin_url, credential) as admin:
        with pytest.raises(ClientError, match="exactly one of holder_id and user_id"):
            session_auth(admin, session_id="s")
        with pytest.raises(ClientError, match="exactly one of holder_id and user_id"):
            session_auth(admin, session_id="s", holder_id="h", user_id="u")
        with pytest.raises(ClientError, match="session_id must be a non-empty string"):
            session_auth(admin, session_id="", user_id="u")
    with pytest.raises(ClientError, match=r"admin must be a saihm\.client\.Admin"):
        session_auth("not an admin", session_id="s", user_id="u")  # type: ignore[arg-type]


def test_langgraph_store_through_the_authority(both) -> None:
    require_module("langgraph", "langgraph")
    from saihm.integrations.langgraph import SaihmStore

    _, url, admin_url, credential = both
    users: dict[str, str] = {}
    with Admin(admin_url, credential) as admin:
        kw = {"admin": admin, "user_id": "carol", "users": users}
        with SaihmStore(url, session_id="one", **kw) as one:
            one.put(("prefs",), "tea", {"likes": "green"})
            assert one.get(("prefs",), "tea").value == {"likes": "green"}
        with SaihmStore(url, session_id="two", **kw) as two:
            assert two.get(("prefs",), "tea") is None
        with SaihmStore(url, session_id="one", **kw) as one_again:
            assert one_again.get(("prefs",), "tea").value == {"likes": "green"}
        with pytest.raises(ClientError, match="needs admin="):
            SaihmStore(url, "Bearer x", session_id="one")
        with pytest.raises(ClientError, match="either auth_header or admin"):
            SaihmStore(url, "Bearer x", **kw, session_id="one")


def test_llamaindex_memory_through_the_authority(both) -> None:
    require_module("llama_index.core", "llamaindex")
    from llama_index.core.base.llms.types import ChatMessage

    from saihm.integrations.llamaindex import SaihmMemory

    _, url, admin_url, credential = both
    with Admin(admin_url, credential) as admin:
        kw = {"endpoint": url, "admin": admin, "user_id": "dora"}
        one = SaihmMemory(session_id="one", **kw)
        one.put(ChatMessage(role="user", content="jasmine"))
        assert [m.content for m in SaihmMemory(session_id="one", **kw).get_all()] == ["jasmine"]
        assert SaihmMemory.from_defaults(session_id="two", **kw).get_all() == []
        assert credential not in repr(one) and "Bearer" not in one.to_json()


def test_the_docs_example_runs(both) -> None:
    """docs/integrations.md, "A session or a user through the authority service", as written
    (only the two URLs pointed at this test's processes)."""
    require_module("langchain_core", "langchain")
    from saihm.integrations.langchain import SaihmChatMessageHistory

    _, url, admin_url, credential = both
    docs = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    section = docs.split("### A session or a user through the authority service", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    example = example.replace("http://127.0.0.1:8090/", admin_url)
    example = example.replace("http://127.0.0.1:8080/", url)
    scope: dict = {"credential": credential}
    exec(compile(example, "integrations.md", "exec"), scope)
    scope["admin"].close()
    assert list(scope["users"]) == ["alice"] and len(scope["sessions"]) == 1
    with Admin(admin_url, credential) as admin:
        again = SaihmChatMessageHistory(
            url,
            admin=admin,
            user_id="alice",
            session_id="chat-1",
            users=scope["users"],
            sessions=scope["sessions"],
        )
    assert [m.content for m in again.messages] == ["I like green tea"]
