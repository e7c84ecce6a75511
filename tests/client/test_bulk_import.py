"""A bulk import through the client at the operator's default rate limit loses nothing and
raises nothing (issue 32 item 8), against the real ``saihm serve``.

The default per-token rate (50 a second) is kept; the burst is made small so that a few
hundred remembers meet many 429s. ``SAIHM_IMPORT_COUNT`` sets how many (10000 for the figure
in docs/integrations.md), ``SAIHM_IMPORT_BURST`` the burst (200 is the default).
"""

from __future__ import annotations

import asyncio
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from saihm.client import AsyncClient, Client
from tests.support.serve import holder_create, serving

COUNT = int(os.environ.get("SAIHM_IMPORT_COUNT", "300"))
BURST = os.environ.get("SAIHM_IMPORT_BURST", "5")
WRITERS = 8


def refusals(tmp: Path) -> int:
    """429 answers the server's access log shows."""
    logged = (tmp / "serve.err").read_text() + (tmp / "serve.out").read_text()
    return len(re.findall(r"\"status\": ?429", logged))


def test_a_bulk_import_through_client_at_the_default_rate_loses_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data), "--rate-burst", BURST) as (_proc, url):
        auth = "Bearer " + holder_create(data)["token"]
        with Client(url, auth) as client, ThreadPoolExecutor(WRITERS) as pool:
            # One client, one token, several threads: faster than the rate on any machine.
            ids = list(
                pool.map(lambda i: client.remember(f"imported fact {i}").cell_id, range(COUNT))
            )
            shards = client.status().shards
            texts = {cell.plaintext for cell in client.recall(limit=COUNT + 10)}
        refused = refusals(tmp_path)
    assert len(set(ids)) == COUNT and sum(shards.values()) == COUNT
    assert texts == {f"imported fact {i}" for i in range(COUNT)}
    assert refused >= WRITERS  # the limit was met again and again, and waited out


def test_concurrent_async_writers_share_one_token_and_lose_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    writers = WRITERS

    async def run(url: str, auth: str) -> tuple[list[str], int]:
        async with AsyncClient(url, auth) as client:

            async def writer(w: int) -> list[str]:
                return [
                    (await client.remember(f"writer {w} fact {i}")).cell_id
                    for i in range(w, COUNT, writers)
                ]

            done = await asyncio.gather(*(writer(w) for w in range(writers)))
            status = await client.status()
        return [cell for ids in done for cell in ids], sum(status.shards.values())

    with serving(tmp_path, "--data", str(data), "--rate-burst", BURST) as (_proc, url):
        auth = "Bearer " + holder_create(data)["token"]
        ids, stored = asyncio.run(run(url, auth))
        refused = refusals(tmp_path)
    assert len(set(ids)) == COUNT == stored
    assert refused >= writers  # every writer was refused at least once
