"""A researcher with only a log URL: ``saihm replay URL --format parquet`` against the real
``saihm serve``, a second run after the log grew, and docs/formats.md §8's DuckDB example run
on the dataset this test makes."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.cli import run_saihm
from tests.support.serve import fetch, post, serving

from .conftest import World

ROOT = Path(__file__).resolve().parents[2]


def _need(module: str) -> None:
    """Skip without ``module`` (saihm[research]); under CI=true fail instead."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {module} is missing: pip install 'saihm[research]'")
        pytest.skip(f"{module} is not installed (saihm[research])")


def _replay(url: str, out: Path) -> dict:
    done = run_saihm("replay", url, "--format", "parquet", "--out", str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _log_size(url: str) -> int:
    status, note = fetch(url + "log/checkpoint")
    assert status == 200
    return int(note.split(b"\n")[1])


def example() -> str:
    """The Python block of docs/formats.md §8 marked as the research example."""
    text = (ROOT / "docs" / "formats.md").read_text()
    found = re.search(r"<!-- research example -->\n```python\n(.*?)```", text, re.S)
    assert found, "docs/formats.md lost its research example"
    return found.group(1)


def test_replay_from_only_the_url_then_again_after_the_log_grew(
    world: World, tmp_path: Path
) -> None:
    _need("pyarrow")
    _need("duckdb")
    import pyarrow.parquet as pq

    out = tmp_path / "study"
    with serving(tmp_path, "--data", str(world.data)) as (_, url):
        first = _replay(url, out)
        size = _log_size(url)
        assert first["verified"] is True and first["events"] == first["newEvents"] == size
        events = pq.read_table(out / "events.parquet")
        assert events.column("index").to_pylist() == list(range(size))
        memories = pq.read_table(out / "memories.parquet").to_pylist()
        assert len(memories) == 6 and sum(m["forgotten"] is not None for m in memories) == 1
        assert pq.read_table(out / "shares.parquet").num_rows == 0
        # The log grows: a share accepted, two memories, one forgotten.
        status, b = post(url, world.token_b, "saihm_status", {})
        assert status == 200
        status, shared = post(
            url,
            world.token_a1,
            "saihm_share",
            {
                "granteeIdHashesHex": [b["agentIdHashHex"]],
                "shardIds": [world.cells["beta"].hex()],
                "type": "permanent",
                "scope": "read",
            },
        )
        assert status == 200, shared
        contract = {"contractId": shared["contractId"]}
        assert post(url, world.token_b, "saihm_accept_contract", contract)[0] == 200
        for text in ("one more", "and another"):
            assert post(url, world.token_a2, "saihm_remember", {"content": text})[0] == 200
        assert post(url, world.token_a1, "saihm_forget", {"id": world.cells["delta"].hex()})[0]
        grown = _log_size(url)
        second = _replay(url, out)
    assert grown > size and second["events"] == grown and second["newEvents"] == grown - size
    parts = sorted(p.name for p in (out / "events.parquet").iterdir())
    assert len(parts) == 2 and parts[1].startswith(f"part-{size:012d}-")
    events = pq.read_table(out / "events.parquet")
    assert events.column("index").to_pylist() == list(range(grown))  # appended, none twice
    memories = pq.read_table(out / "memories.parquet").to_pylist()
    assert len(memories) == 8 and sum(m["forgotten"] is not None for m in memories) == 2
    (share,) = pq.read_table(out / "shares.parquet").to_pylist()
    assert (
        share["contractId"] == shared["contractId"] and share["toHolderId"] == b["agentIdHashHex"]
    )
    assert share["accepted"] is not None and share["revoked"] is None

    # docs/formats.md §8: operations per holder per day, and the erasure rate.
    namespace: dict = {}
    exec(example().replace("DIR", str(out)), namespace)
    rows = events.to_pylist()
    want = Counter(
        (r["holderId"], datetime.fromtimestamp(r["timestamp"].timestamp(), UTC).date())
        for r in rows
    )
    got = {(h, d.date() if isinstance(d, datetime) else d): n for h, d, n in namespace["per_day"]}
    assert got == dict(want)
    assert namespace["erasure_rate"] == pytest.approx(2 / 8)
