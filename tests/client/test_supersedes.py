"""Corrections from agents (issue 33 item 5): ``remember(..., supersedes=)`` through the sync
and async clients against the real ``saihm serve``; the new cell's recall element names the
cell it replaced (``"supersedes"``), also after ``saihm rebuild``. And ``metadata`` (issue 33
item 6): a JSON object kept beside the text, returned by recall, never part of the text."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from saihm.client import AsyncClient, Client, ClientError
from tests.support.serve import SAIHM, fetch, holder_create, serving


def log_operations(url: str, holder: str) -> list[tuple[str, str]]:
    """(operation, subjectId) of the holder's receipts in the public log, in log order."""
    status, raw = fetch(url + f"log/v1/receipts?holderId={holder}&limit=1000")
    assert status == 200
    return [
        (e["receipt"]["operation"], e["receipt"]["subjectId"]) for e in json.loads(raw)["receipts"]
    ]


def test_sync_remember_supersedes_and_the_link_survives_rebuild(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        holder = holder_create(data)
        token = holder["token"]
        with Client(url, f"Bearer {token}") as client:
            old = client.remember("Priya is vegetarian")
            before = log_operations(url, holder["holderId"])
            new = client.remember("Priya eats fish again", supersedes=old.cell_id.upper())
            after = log_operations(url, holder["holderId"])
            [cell] = client.recall()
            # The old cell is gone: forgetting it again finds nothing to erase.
            assert client.forget(old.cell_id).success is False
        # One change, both receipts: REMEMBER of the new cell, then FORGET of the old one.
        assert after[len(before) :] == [("REMEMBER", new.cell_id), ("FORGET", old.cell_id)]
    assert (cell.cell_id, cell.plaintext) == (new.cell_id, "Priya eats fish again")
    assert cell.supersedes == old.cell_id and cell.model_extra == {}
    done = subprocess.run(
        [SAIHM, "rebuild", "--data", str(data), "--replace"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    with (
        serving(tmp_path, "--data", str(data), name="again") as (_, url),
        Client(url, f"Bearer {token}") as client,
    ):
        [rebuilt] = client.recall("fish")
    assert (rebuilt.cell_id, rebuilt.supersedes) == (new.cell_id, old.cell_id)


def test_async_remember_supersedes_metadata_and_refusals(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def run(url: str, auth: str) -> None:
        async with AsyncClient(url, auth) as client:
            old = await client.remember("lives in Leeds", metadata={"key": "qzxvk", "n": 1})
            new = await client.remember(
                "moved to York", supersedes=old.cell_id, metadata={"key": "qzxvk", "n": 2}
            )
            [cell] = await client.recall("York")
            assert (cell.cell_id, cell.supersedes) == (new.cell_id, old.cell_id)
            assert cell.metadata == {"key": "qzxvk", "n": 2} and cell.plaintext == "moved to York"
            # The metadata is not content: a word only it holds finds nothing (a made-up word,
            # so the semantic stage, on by default, has no meaning to match either).
            assert await client.recall("qzxvk") == []
            plain = await client.remember("a fact that replaced nothing")
            [other] = [c for c in await client.recall() if c.cell_id == plain.cell_id]
            assert other.supersedes is None and other.metadata is None
            # A superseded cell cannot be superseded again; nothing is written.
            with pytest.raises(ClientError) as caught:
                await client.remember("moved to Hull", supersedes=old.cell_id)
            assert caught.value.code == "erased"
            with pytest.raises(ClientError) as caught:
                await client.remember("x", supersedes="ab" * 32)
            assert caught.value.code == "not_found"
            for bad in ("not-hex", "ab" * 31, "ab" * 33):
                with pytest.raises(ClientError) as caught:
                    await client.remember("x", supersedes=bad)
                assert caught.value.kind == "refused" and bad not in str(caught.value)
            with pytest.raises(ClientError) as caught:
                await client.remember("x", metadata={"v": float("nan")})
            assert caught.value.kind == "refused"
            assert sorted(c.plaintext for c in await client.recall()) == [
                "a fact that replaced nothing",
                "moved to York",
            ]

    with serving(tmp_path, "--data", str(data), model=True) as (_, url):
        asyncio.run(run(url, "Bearer " + holder_create(data)["token"]))
