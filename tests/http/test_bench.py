"""``saihm bench http`` runs small and prints figures of the pinned shape."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

KEYS = {"bench", "figure", "value", "unit", "peer", "peer_value", "ratio", "server"}


def test_bench_http_small_run_yields_every_figure():
    from saihm.bench.http import SERVER, HttpOptions, run

    figures = list(run(HttpOptions(seconds=0.3, n=3, concurrency=2, cells=1)))
    cores = os.cpu_count() or 1
    per_phase = [
        name
        for workers in sorted({1, 2, cores})
        for name in (
            f"remember_per_s_http_{workers}_worker" + ("s" if workers > 1 else ""),
            f"recall_p50_ms_http_{workers}_worker" + ("s" if workers > 1 else ""),
        )
    ]
    assert [f["figure"] for f in figures] == [
        *per_phase,
        "remember_per_s_2_workers_vs_1",
        f"remember_per_s_http_{cores}_workers_vs_floor",
    ]
    floor = figures[-1]
    assert "two-signature floor" in floor["peer"]
    assert floor["value"] == next(
        f["value"] for f in figures if f["figure"].startswith(f"remember_per_s_http_{cores}_")
    )
    for figure in figures:
        assert set(figure) == KEYS and figure["bench"] == "http"
        assert figure["value"] > 0 and figure["peer_value"] > 0 and figure["ratio"] > 0
        assert figure["server"] == SERVER and "rate limiting off" in SERVER


#: Calls made at once with one token: past the default bucket (burst 200, refilled 50 per
#: second) unless the server took more than (CALLS - 200) / 50 = 8 s to answer them.
CALLS = 600


async def _statuses(url: str, token: str) -> list[int]:
    import aiohttp

    body = json.dumps({"method": "saihm_status", "params": {}}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:

        async def one() -> int:
            async with session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                return resp.status

        return list(await asyncio.gather(*(one() for _ in range(CALLS))))


def test_the_bench_server_runs_without_a_rate_limit(tmp_path: Path) -> None:
    """The bench's own ``saihm serve`` answers more calls on one token than the default rate
    limit allows, so a fast machine measures the server, not the limit (no 429)."""
    from saihm.bench.http import _holder, _server
    from saihm.compose import initialise, open_operator
    from saihm.config import Config

    config = Config.for_data(tmp_path / "data")
    authority = initialise(config)
    operator = open_operator(config)
    try:
        token = _holder(operator, authority, 0)
    finally:
        operator.store.close()
    with _server(tmp_path, config.data_dir, 1) as url:
        statuses = asyncio.run(_statuses(url, token))
    assert len(statuses) == CALLS and 429 not in statuses, sorted(set(statuses))
