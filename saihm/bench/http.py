"""``saihm bench http``: remember throughput and recall latency over HTTP on loopback.

Each HTTP figure is measured against the real ``saihm serve`` (plain HTTP on 127.0.0.1) with 1
and with 2 workers (and with as many as the machine has cores), beside the same operation on an
in-process :class:`Operator` in the same run: the ratio is the HTTP overhead (throughput: HTTP /
in-process; latency: HTTP / in-process). Then come the 2-worker / 1-worker throughput ratio and
remember/s with ``--workers`` equal to the core count against cores x the two-signature floor
(``1 / (2 x ML-DSA-65 sign time)``, measured in the same run); the load generator shares those
cores. Every phase uses a fresh holder whose session holds ``--cells`` cells, so recall answers
the same amount in every phase.

The bench's own ``saihm serve`` runs with ``--rate-limit 0``: the default per-token limit (50 per
second, burst 200; docs/operations.md "Rate limit") would answer 429 long before a quiet
machine's throughput is reached, and the figure would be the limit's, not the server's. Every
figure says so in its ``server`` field.

Options: ``--seconds S`` per throughput phase (default 5), ``--n N`` recall calls per phase
(default 200), ``--concurrency C`` callers (default 16), ``--cells K`` (default 20).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from saihm.bench.store import sign_seconds as _sign_seconds

__all__ = ["HttpOptions", "run"]

READY_SECONDS = 60
#: How the bench's server is run, as each figure reports it.
SERVER = "saihm serve --rate-limit 0 (rate limiting off)"


def _figure(name: str, value: float, unit: str, peer: str, peer_value: float, ratio: float) -> dict:
    return {
        "bench": "http",
        "figure": name,
        "value": round(value, 3),
        "unit": unit,
        "peer": peer,
        "peer_value": round(peer_value, 3),
        "ratio": round(ratio, 3) if peer_value else None,
        "server": SERVER,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _server(config_dir: Path, data: Path, workers: int) -> Iterator[str]:
    """``saihm serve`` on a free loopback port, rate limiting off; yields its URL once it
    answers."""
    port = _free_port()
    command = [sys.executable, "-m", "saihm.commands.main", "serve", "--data", str(data)]
    command += ["--port", str(port), "--workers", str(workers), "--rate-limit", "0"]
    proc = subprocess.Popen(
        command, cwd=config_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + READY_SECONDS
        while True:
            try:
                with urllib.request.urlopen(url + "log/checkpoint", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("saihm serve did not start")
            try:
                proc.wait(timeout=0.05)
                raise RuntimeError(f"saihm serve exited with {proc.returncode}")
            except subprocess.TimeoutExpired:
                continue
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _holder(operator, authority, cells: int) -> str:
    """A fresh holder's token whose session holds ``cells`` cells."""
    from saihm.events import CapabilityScope
    from saihm.protocol import call as binding_call

    holder_id = operator.admin.create_holder()
    token = authority.issue(holder_id, secrets.token_bytes(32), CapabilityScope(), 3600).to_token()
    for i in range(cells):
        binding_call(operator, token, "saihm_remember", {"content": f"seed {i}"})
    return token


def _in_process(
    call: Callable[[str, str, dict], object], token: str, opts: HttpOptions
) -> tuple[float, float]:
    """(remembers per second with ``concurrency`` threads, recall p50 in ms) in-process."""
    deadline = time.monotonic() + opts.seconds
    counts = []

    def worker() -> int:
        done = 0
        while time.monotonic() < deadline:
            call(token, "saihm_remember", {"content": "bench"})
            done += 1
        return done

    # Recall first, so its session holds exactly --cells cells in every phase.
    latencies = []
    for _ in range(opts.n):
        t0 = time.perf_counter()
        call(token, "saihm_recall", {})
        latencies.append(time.perf_counter() - t0)
    started = time.monotonic()
    with ThreadPoolExecutor(opts.concurrency) as pool:
        counts = list(pool.map(lambda _: worker(), range(opts.concurrency)))
    rate = sum(counts) / (time.monotonic() - started)
    return rate, statistics.median(latencies) * 1000


async def _over_http(url: str, tokens: list[str], opts: HttpOptions) -> tuple[float, float]:
    """The same two figures over HTTP with an aiohttp client (keep-alive connections)."""
    import aiohttp

    def body(method: str, params: dict) -> bytes:
        return json.dumps({"method": method, "params": params}).encode()

    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=opts.concurrency)
    ) as session:

        async def post(token: str, method: str, params: dict) -> None:
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            async with session.post(url, data=body(method, params), headers=headers) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"{method} answered {resp.status}")

        latencies = []
        for _ in range(opts.n):
            t0 = time.perf_counter()
            await post(tokens[0], "saihm_recall", {})
            latencies.append(time.perf_counter() - t0)
        deadline = time.monotonic() + opts.seconds
        counts = [0] * opts.concurrency

        async def worker(k: int) -> None:
            while time.monotonic() < deadline:
                await post(tokens[k % len(tokens)], "saihm_remember", {"content": "bench"})
                counts[k] += 1

        started = time.monotonic()
        await asyncio.gather(*(worker(k) for k in range(opts.concurrency)))
        rate = sum(counts) / (time.monotonic() - started)
    return rate, statistics.median(latencies) * 1000


@dataclass(frozen=True)
class HttpOptions:
    """``--seconds`` per throughput phase, ``--n`` recall calls per phase, ``--concurrency``
    callers, ``--cells`` in the recalled session."""

    seconds: float = 5.0
    n: int = 200
    concurrency: int = 16
    cells: int = 20

    def problem(self) -> str | None:
        """What makes these options measure nothing, or None."""
        if self.seconds <= 0 or self.n < 1 or self.concurrency < 1 or self.cells < 0:
            return "--seconds, --n and --concurrency must be positive"
        return None


def run(opts: HttpOptions) -> Iterator[dict]:
    """Yield the HTTP figures, each beside its in-process peer measured in the same run."""
    from saihm.compose import initialise, open_operator
    from saihm.config import Config
    from saihm.errors import MalformedInput
    from saihm.protocol import call as binding_call

    if (problem := opts.problem()) is not None:
        raise MalformedInput(problem)
    cores = os.cpu_count() or 1
    phases = sorted({1, 2, cores})
    with tempfile.TemporaryDirectory(prefix="saihm-bench-http-") as tmp:
        config = Config.for_data(Path(tmp) / "data")
        authority = initialise(config)
        operator = open_operator(config)
        try:
            tokens = {
                phase: [_holder(operator, authority, opts.cells) for _ in range(2)]
                for phase in ("in-process", *phases)
            }
            local_rate, local_p50 = _in_process(
                functools.partial(binding_call, operator), tokens["in-process"][0], opts
            )
        finally:
            operator.store.close()
        floor = 1 / (2 * _sign_seconds(max(0.5, opts.seconds / 2)))
        measured = {}
        for workers in phases:
            with _server(Path(tmp), config.data_dir, workers) as url:
                measured[workers] = asyncio.run(_over_http(url, tokens[workers], opts))
    for workers, (rate, p50) in measured.items():
        label = f"{workers}_worker" + ("s" if workers > 1 else "")
        yield _figure(
            f"remember_per_s_http_{label}",
            rate,
            "ops/s",
            "in-process",
            local_rate,
            rate / local_rate,
        )
        yield _figure(
            f"recall_p50_ms_http_{label}", p50, "ms", "in-process", local_p50, p50 / local_p50
        )
    rate1, rate2 = measured[1][0], measured[2][0]
    yield _figure("remember_per_s_2_workers_vs_1", rate2, "ops/s", "1 worker", rate1, rate2 / rate1)
    ceiling, rate = cores * floor, measured[cores][0]
    yield _figure(
        f"remember_per_s_http_{cores}_workers_vs_floor",
        rate,
        "ops/s",
        f"{cores} cores x the two-signature floor (1 / (2 x ML-DSA-65 sign time), this run); "
        "the load generator shares the cores",
        ceiling,
        rate / ceiling,
    )
