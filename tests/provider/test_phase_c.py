"""Issue 15 item 5 in process: text queries match content, the consumer comes from the token,
the person's forget, passport sections reported for the live grant, and providers.json."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.errors import MalformedInput
from saihm.provider import registry
from saihm.provider.http import add_routes
from saihm.provider.models import MemoryQuery, MemoryRecord
from saihm.provider.records import content_matches
from tests.support.serve import SAIHM


def _record(content: object) -> MemoryRecord:
    stamp = "2026-01-01T00:00:00Z"
    return MemoryRecord(
        id="0" * 64, namespace="n", content=content, created_at=stamp, updated_at=stamp
    )


def test_text_query_matches_content_not_field_names_or_the_marker(world) -> None:
    first = world.put("projects", {"name": "saihm", "lang": "Python"})
    world.put("projects", {"name": "kettle"})
    cursor = world.consumer("cursor", ["projects"])
    # The wrapper's key "saihm-memory": its word "memory" is in no value ("saihm" is one).
    assert cursor.query(MemoryQuery(text="memory")).records == ()
    assert cursor.query(MemoryQuery(text="name")).records == ()
    assert [r.id for r in cursor.query(MemoryQuery(text="python SAIHM")).records] == [first]
    assert len(cursor.query(MemoryQuery(text="   ")).records) == 2


keys = st.text(alphabet="abcdefghij", min_size=3, max_size=6)
values = st.text(alphabet="klmnopqrst", min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, min_size=1, max_size=4), st.data())
def test_content_matching_sees_values_and_never_keys(content: dict, data) -> None:
    """Keys and values use disjoint letters, so no key can occur inside a value."""
    key = data.draw(st.sampled_from(sorted(content)))
    value = data.draw(st.sampled_from(sorted(content.values())))
    record = _record({"outer": content, "list": [content]})
    assert not content_matches(record, key)
    assert content_matches(record, value.upper())
    assert content_matches(_record(value), value)


def test_query_without_consumer_takes_it_from_the_token_and_a_wrong_one_is_refused(world):
    world.put("projects", {"name": "saihm"})
    cursor = world.consumer("cursor", ["projects"])
    assert len(cursor.query(MemoryQuery()).records) == 1
    from saihm.errors import NotPermitted

    with pytest.raises(NotPermitted):
        cursor.query(MemoryQuery(consumer="claude"))


async def test_http_query_needs_no_body_consumer(world, aiohttp_client) -> None:
    world.put("projects", {"name": "saihm"})
    token = world.token("cursor", ["projects"])
    app = web.Application()
    add_routes(app, world.vault)
    client = await aiohttp_client(app)
    auth = {"Authorization": f"Bearer {token}"}
    for path in ("query", "graph"):
        resp = await client.post(f"/memory/v1/{path}", json={}, headers=auth)
        assert resp.status == 200, path
    resp = await client.post("/memory/v1/query", json={"consumer": "claude"}, headers=auth)
    assert resp.status == 403 and await resp.json() == {"error": "consumer_mismatch"}


def test_status_reports_the_sections_of_the_live_grant_only(world) -> None:
    world.vault.grant("cursor", ["projects"], "read", sections=("coding",))
    _, token = world.vault.grant("cursor", ["projects"], "read", sections=("identity",))
    assert world.vault.for_consumer(token).status().sections == ("identity",)


def test_person_forget_erases_and_logs_once(world) -> None:
    rid = world.put("projects", {"name": "saihm"})
    cursor = world.consumer("cursor", ["projects"])
    done = world.vault.forget(rid)
    assert done["erased"] is True and len(done["receiptId"]) == 64
    assert cursor.query(MemoryQuery()).records == ()
    assert world.vault.forget(rid)["erased"] is False
    with pytest.raises(MalformedInput):
        world.vault.forget("not-hex")


def test_register_adds_replaces_and_keeps_other_entries(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".ai-passport" / "memory" / "providers.json"
    path.parent.mkdir(parents=True)
    other = {"id": "other-provider", "version": "9", "dataDir": "/elsewhere"}
    path.write_text(json.dumps({"providers": [other]}))
    registry.register(path, tmp_path / "data", "http://127.0.0.1:8080/")
    item = registry.register(path, tmp_path / "data")
    got = json.loads(path.read_text())["providers"]
    assert got == [other, item]  # replaced in place of the first, the other kept
    assert item["mcp"]["args"] == ["memory", "mcp"] and Path(item["mcp"]["command"]).is_absolute()
    assert "token" not in path.read_text().lower()


def test_register_refuses_a_file_that_is_not_a_registry_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "providers.json"
    for text in ("{not json", '{"providers": 3}', "[]"):
        path.write_text(text)
        with pytest.raises(MalformedInput):
            registry.register(path, tmp_path / "data")
        assert path.read_text() == text


def test_register_command_writes_the_default_registry_under_home(tmp_path: Path) -> None:
    from saihm.compose import initialise
    from saihm.config import Config

    data = tmp_path / "data"
    initialise(Config.for_data(data))
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    run = [SAIHM, "memory"]
    subprocess.run([*run, "init", "--data", str(data)], check=True, capture_output=True, env=env)
    done = subprocess.run(
        [*run, "register", "--data", str(data)], check=True, capture_output=True, text=True, env=env
    )
    written = tmp_path / "home" / ".ai-passport" / "memory" / "providers.json"
    assert json.loads(done.stdout)["registry"] == str(written)
    assert json.loads(written.read_text())["providers"][0]["dataDir"] == str(data.resolve())


def test_text_query_ranks_like_saihm_recall(world) -> None:
    """Issue #23 item 5: one retrieval model. A natural question finds the record that shares
    a word with it (the old AND of substrings found nothing), most relevant first."""
    world.put("notes", {"fact": "The user prefers dark mode", "n": 1})
    world.put("notes", {"fact": "The user drinks tea with the user's mother"})
    world.put("notes", {"fact": "Lunch is at noon"})
    cursor = world.consumer("cursor", ["notes"])
    question = "which theme does the user prefer?"
    got = [r.content["fact"] for r in cursor.query(MemoryQuery(text=question)).records]
    assert got == ["The user prefers dark mode", "The user drinks tea with the user's mother"]
    assert cursor.query(MemoryQuery(text="zebra quokka")).records == ()
