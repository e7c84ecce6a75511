"""``saihm bench store --store URL``: the store's scaling figures, LMDB beside PostgreSQL.

docs/scaling.md draws its throughput section from these figures, all measured in one run:

- ``remember_per_s_<backend>_<n>_<processes|nodes>``: saihm_remember through
  ``saihm.protocol.call`` (authenticate, seal, two ML-DSA-65 signatures, one commit) by
  ``n`` operator processes on one store (one LMDB data directory, or one PostgreSQL database),
  each with ``--node-threads`` threads so its commit waits overlap its signing. Every process
  opens the store as a node of ``saihm serve --store`` does: its own connection pool, its own
  caches, the shared log.
- ``commit_ms_empty_<backend>``: an empty write transaction (begin, take the one-writer lock,
  commit); ``commit_ms_one_put_<backend>``: one 32-byte put committed (the durable floor: on
  PostgreSQL a WAL flush, which an empty transaction skips); ``commit_ms_remember_<backend>``:
  the write transaction of one remember (guard, cell, DEK, projections, leaf, tree), timed
  around the store's transaction in a single-threaded loop. On PostgreSQL each of these is
  round trips to the database plus its WAL flush: ``1000 / commit_ms_remember`` bounds the
  batches per second every node together can commit, whatever the number of nodes.

The PostgreSQL figures run in scratch schemas of the given database (``CREATE SCHEMA``, dropped
afterwards), so the URL may name a database that holds nothing else of value; the role needs
the CREATE privilege on it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from saihm.bench.figures import figure as figure_of
from saihm.protocol import call as binding_call

__all__ = ["run_scaling"]

Figure = dict[str, object]
_BUSY_BATCH = 8  # remembers per write transaction for the ceiling on paper
_READY_SECONDS = 120.0


def _with_schema(url: str, schema: str) -> str:
    """``url`` with its ``search_path`` set to ``schema`` (libpq's ``options`` parameter)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "options"]
    given = dict(parse_qsl(parts.query)).get("options", "")
    query.append(("options", f"{given} -c search_path={schema}".strip()))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


@contextmanager
def _scratch(url: str) -> Iterator[str]:
    """A URL of a new, empty schema in ``url``'s database, dropped (with all in it) after."""
    import psycopg

    from saihm.errors import Unavailable
    from saihm.storage.url import scrub

    schema = f"saihm_bench_{secrets.token_hex(6)}"
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    except psycopg.Error as err:
        raise Unavailable(
            scrub(f"cannot create a scratch schema: {str(err).strip().splitlines()[0]}", url)
        ) from None
    try:
        yield _with_schema(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _node(
    data: str,
    store: str | None,
    seconds: float,
    threads: int,
    ready: Any,
    start: Any,
    results: Any,
) -> None:
    """One operator process: open the store, make a holder per thread, report ready, then
    remember for ``seconds`` after ``start`` is set; put ``(count, elapsed)`` on ``results``."""
    from saihm.authority import Authority
    from saihm.config import Config
    from saihm.events import CapabilityScope
    from saihm.operator import Operator
    from saihm.store import Store

    config = Config.for_data(data, store=store, checkpoint_interval=3600.0)
    operator = Operator(Store(config), config)
    try:
        authority = Authority.open(config.authority_dir)
        tokens = []
        for _ in range(threads):
            holder = operator.admin.create_holder()
            cap = authority.issue(holder, secrets.token_bytes(32), CapabilityScope(), 86_400)
            tokens.append(cap.to_token())
        for token in tokens:
            binding_call(operator, token, "saihm_remember", {"content": "warm-up"})
        ready.put(os.getpid())
        if not start.wait(_READY_SECONDS):
            results.put((0, 0.0, {}))
            return
        counts = [0] * threads
        deadline = time.perf_counter() + seconds

        def worker(i: int) -> None:
            params = {"content": f"bench memory from {os.getpid()}/{i}"}
            while time.perf_counter() < deadline:
                binding_call(operator, tokens[i], "saihm_remember", params)
                counts[i] += 1

        before = _costs(operator)
        began = time.perf_counter()
        pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        elapsed = time.perf_counter() - began
        after = _costs(operator)
        spent = {name: after[name] - before[name] for name in after}
        results.put((sum(counts), elapsed, spent))
    finally:
        operator.store.close()


def _costs(operator: Any) -> dict[str, float]:
    """The storage's running cost counters (PostgreSQL's ``figures``; none for LMDB)."""
    figures = getattr(operator.store.env.storage, "figures", None)
    return figures() if figures is not None else {}


def _remember_rate(
    data: Path, store: str | None, nodes: int, seconds: float, threads: int
) -> tuple[float, int, dict[str, float]]:
    """Remembers per second of ``nodes`` operator processes on one store, started together;
    also the remembers made and what their storage spent (summed over the nodes)."""
    ctx = mp.get_context("spawn")  # never fork a process holding LMDB or a connection pool
    ready, results, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=_node, args=(str(data), store, seconds, threads, ready, start, results))
        for _ in range(nodes)
    ]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=_READY_SECONDS)
        start.set()
        done = [results.get(timeout=_READY_SECONDS + seconds) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    count = sum(c for c, _, _ in done)
    elapsed = max(e for _, e, _ in done)
    if any(p.exitcode for p in procs) or elapsed <= 0:
        raise RuntimeError("a bench node failed")
    spent: dict[str, float] = {}
    for _, _, costs in done:
        for name, amount in costs.items():
            spent[name] = spent.get(name, 0.0) + amount
    spent["elapsed_seconds"] = elapsed
    return count / elapsed, count, spent


def _round_trip_ms(url: str, samples: int) -> float:
    """The median time of one round trip to the database (a prepared ``SELECT 1``), in ms:
    what this machine's loopback adds to every round trip counted under the lock."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        out = []
        for i in range(samples + 5):
            began = time.perf_counter()
            conn.execute("SELECT 1", prepare=True).fetchone()
            if i >= 5:
                out.append((time.perf_counter() - began) * 1000)
    return _p50(out)


def ceiling(
    batch: float, hold_ms: float, locked_round_trips: float, loopback_ms: float, rtt_ms: float
) -> float:
    """Remembers per second every node together can commit, at most: the write lock admits
    one transaction at a time, so ``batch / hold``, where the hold is the measured one with
    its round trips under the lock moved from this machine's loopback (``loopback_ms``) to a
    network of ``rtt_ms`` (docs/scaling.md "How throughput grows with nodes")."""
    hold = max(hold_ms - locked_round_trips * loopback_ms, 0.0) + locked_round_trips * rtt_ms
    return float("inf") if hold <= 0 else batch * 1000 / hold


def _cost_figures(
    nodes: int,
    count: int,
    spent: dict[str, float],
    loopback_ms: float,
    rtt_ms: float,
    floor_ms: float,
    **extra: Any,
) -> Iterator[Figure]:
    """Per remember, what PostgreSQL spent on it with ``nodes`` nodes, and the ceiling: at the
    batch measured, and on paper at a batch of :data:`_BUSY_BATCH` (the lock hold of a
    transaction taken as ``floor_ms``, the commit of one put, plus what each remember added
    to it in this run; the round trips under the lock as one plus those each remember added).
    """
    txns = spent.get("write_transactions", 0.0)
    if not count or not txns:
        return
    batch = count / txns
    hold_ms = spent["lock_seconds"] * 1000 / txns
    locked = spent["locked_round_trips"] / txns
    label = f"postgresql_{nodes}_node{'s' if nodes > 1 else ''}"
    per = {
        "statements": spent["statements"] / count,
        "round_trips": spent["round_trips"] / count,
        "write_statements": spent["write_statements"] / count,
        "locked_round_trips": spent["locked_round_trips"] / count,
        "lock_hold_ms": spent["lock_seconds"] * 1000 / count,
    }
    for name, value in per.items():
        yield {
            "bench": "store",
            "figure": f"{name}_per_remember_{label}",
            "value": round(value, 3),
            "unit": "ms" if name.endswith("_ms") else "per remember",
            **extra,
        }
    yield {
        "bench": "store",
        "figure": f"batch_{label}",
        "value": round(batch, 2),
        "unit": "remembers per write transaction",
        "lock_hold_ms_per_transaction": round(hold_ms, 3),
        "locked_round_trips_per_transaction": round(locked, 2),
        "lock_busy_fraction": round(spent["lock_seconds"] / spent["elapsed_seconds"], 3),
        **extra,
    }
    marginal_ms = max(hold_ms - floor_ms, 0.0) / batch
    busy_hold_ms = floor_ms + _BUSY_BATCH * marginal_ms
    busy_locked = 1 + _BUSY_BATCH * max(locked - 1, 0.0) / batch
    busy = ceiling(_BUSY_BATCH, busy_hold_ms, busy_locked, loopback_ms, rtt_ms)
    # The hold as it would be if the committer never waited for a core: its own CPU time in
    # the hold, plus the commit of one put (the WAL flush and a round trip).
    cpu_ms = spent["lock_cpu_seconds"] * 1000 / txns
    own_core = ceiling(batch, cpu_ms + floor_ms, locked, loopback_ms, rtt_ms)
    yield {
        "bench": "store",
        "figure": f"ceiling_remember_per_s_{label}",
        "value": round(ceiling(batch, hold_ms, locked, loopback_ms, rtt_ms), 1),
        f"value_at_batch_{_BUSY_BATCH}": round(busy, 1),
        f"lock_hold_ms_per_remember_at_batch_{_BUSY_BATCH}": round(busy_hold_ms / _BUSY_BATCH, 3),
        "commit_floor_ms": round(floor_ms, 3),
        "unit": "remembers/s, all nodes together",
        "round_trip_ms": rtt_ms,
        "loopback_round_trip_ms": round(loopback_ms, 3),
        "formula": "batch * 1000 / (hold_ms - locked_round_trips * loopback_ms "
        "+ locked_round_trips * round_trip_ms)",
        "lock_cpu_ms_per_transaction": round(cpu_ms, 3),
        "value_with_committer_cpu": round(own_core, 1),
        "committer_cpu_formula": "the same with hold_ms = the committing thread's CPU time in "
        "the hold + commit_floor_ms: the ceiling where the committer has a core to itself",
        **extra,
    }


def _commit_ms(location: str | Path, samples: int, *, put: bool) -> list[float]:
    """Milliseconds per write transaction on a fresh storage: empty, or one 32-byte put."""
    from saihm.storage import open_storage

    storage = open_storage(location, [b"bench-probe"])
    try:
        ns = storage.namespace(b"bench-probe")
        out = []
        for i in range(samples + 5):
            began = time.perf_counter()
            with storage.write() as txn:
                if put:
                    txn.put(i.to_bytes(8, "big"), secrets.token_bytes(32), db=ns)
            if i >= 5:  # the first few open connections and prepare statements
                out.append((time.perf_counter() - began) * 1000)
        return out
    finally:
        storage.close()


def _remember_txn_ms(data: Path, store: str | None, samples: int) -> list[float]:
    """Milliseconds of one remember's write transaction (the store's ``_try_batch``), one
    remember at a time so that each batch holds exactly one change."""
    from saihm.authority import Authority
    from saihm.config import Config
    from saihm.events import CapabilityScope
    from saihm.operator import Operator
    from saihm.store import Store

    timings: list[float] = []

    config = Config.for_data(data, store=store, checkpoint_interval=3600.0)
    timed = Store(config)
    commits = timed.commits
    untimed = commits._try_batch

    def try_batch(batch: list[Any]) -> list[Any]:
        began = time.perf_counter()
        try:
            return untimed(batch)
        finally:
            timings.append((time.perf_counter() - began) * 1000)

    commits._try_batch = try_batch  # type: ignore[method-assign]
    operator = Operator(timed, config)
    try:
        authority = Authority.open(config.authority_dir)
        holder = operator.admin.create_holder()
        token = authority.issue(holder, secrets.token_bytes(32), CapabilityScope(), 86_400)
        for i in range(samples + 5):
            binding_call(operator, token.to_token(), "saihm_remember", {"content": f"timed {i}"})
    finally:
        operator.store.close()
    return timings[-samples:]


def _p50(values: list[float]) -> float:
    return statistics.median(values)


def run_scaling(url: str, opts: Any, floor: float, floor_peer: str) -> Iterator[Figure]:
    """The scaling figures for ``url`` beside LMDB (see the module docstring)."""
    from saihm.compose import initialise
    from saihm.config import Config
    from saihm.storage.url import redact

    figure = partial(figure_of, "store")
    shown = redact(url)
    threads = max(1, opts.node_threads)
    seconds = opts.seconds
    with tempfile.TemporaryDirectory(prefix="saihm-bench-scale-") as tmp_name:
        tmp = Path(tmp_name)
        with _scratch(url) as store_url, _scratch(url) as probe_url:
            rates: dict[tuple[str, int], float] = {}
            costs: dict[int, tuple[int, dict[str, float]]] = {}
            stores: dict[str, str | None] = {"lmdb": None, "postgresql": store_url}
            for backend, store in stores.items():
                data = tmp / backend / "data"
                initialise(Config.for_data(data, store=store))
                for nodes in (1, 2):
                    rate, count, spent = _remember_rate(data, store, nodes, seconds, threads)
                    rates[backend, nodes] = rate
                    if backend == "postgresql":
                        costs[nodes] = (count, spent)
            unit = "remembers/s"
            extra = {
                "node_threads": threads,
                "seconds": seconds,
                "postgresql": shown,
                "cores": os.cpu_count(),
                "load_average_1m": round(os.getloadavg()[0], 2),
            }
            lmdb1 = "remember_per_s_lmdb_1_process (this run)"
            pg1 = "remember_per_s_postgresql_1_node (this run)"
            rows = [
                ("remember_per_s_lmdb_1_process", ("lmdb", 1), floor_peer, floor),
                ("remember_per_s_lmdb_2_processes", ("lmdb", 2), lmdb1, rates["lmdb", 1]),
                ("remember_per_s_postgresql_1_node", ("postgresql", 1), lmdb1, rates["lmdb", 1]),
                (
                    "remember_per_s_postgresql_2_nodes",
                    ("postgresql", 2),
                    pg1,
                    rates["postgresql", 1],
                ),
            ]
            for name, key, peer, peer_value in rows:
                yield figure(name, rates[key], unit, peer, peer_value, True, **extra)
            yield figure(
                "remember_postgresql_2_nodes_vs_lmdb_2_processes",
                rates["postgresql", 2],
                unit,
                "remember_per_s_lmdb_2_processes (this run)",
                rates["lmdb", 2],
                True,
                **extra,
            )

            samples = max(20, opts.commit_samples)
            floors: dict[str, float] = {}
            for name, put in (("empty", False), ("one_put", True)):
                lmdb_ms = _p50(_commit_ms(tmp / f"probe-{name}", samples, put=put))
                pg_ms = floors[name] = _p50(_commit_ms(probe_url, samples, put=put))
                yield figure(
                    f"commit_ms_{name}_postgresql",
                    pg_ms,
                    "ms (p50)",
                    "the same transaction on LMDB (this run)",
                    lmdb_ms,
                    False,
                    samples=samples,
                    commits_per_s_bound=round(1000 / pg_ms, 1),
                )
            loopback_ms = _round_trip_ms(probe_url, samples)
            rtt_ms = float(getattr(opts, "round_trip_ms", 0.2))
            for nodes, (count, spent) in costs.items():
                yield from _cost_figures(
                    nodes, count, spent, loopback_ms, rtt_ms, floors["one_put"], **extra
                )
            lmdb_ms = _p50(_remember_txn_ms(tmp / "lmdb" / "data", None, samples))
            pg_ms = _p50(_remember_txn_ms(tmp / "postgresql" / "data", store_url, samples))
            yield figure(
                "commit_ms_remember_postgresql",
                pg_ms,
                "ms (p50)",
                "one remember's transaction on LMDB (this run)",
                lmdb_ms,
                False,
                samples=samples,
                batches_per_s_bound=round(1000 / pg_ms, 1),
                note="one remember per batch; under load the group commit puts several "
                "remembers in one batch",
            )
