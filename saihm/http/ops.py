"""Health, readiness and Prometheus metrics on the serving port (DESIGN.md "Pinned additions").

- ``GET /healthz``: 200 ``{"status": "ok"}`` while the process answers at all.
- ``GET /readyz``: 200 ``{"status": "ready"}`` when the store answers a read and the
  background jobs (checkpointing, the KEK rotation schedule) are keeping up; otherwise 503
  ``{"status": "not_ready", "reason": code}``. The reasons are listed in :data:`REASONS`.
- ``GET /metrics``: Prometheus text format (prometheus-client): requests and latency by method
  and status, the log's size, checkpoint lag and age, KEK generation and age, cache sizes.

No label carries an id, a token, a path or any content: the only labels are the HTTP method
(one of a fixed set), the status code and the name of a cache. With ``--workers N > 1`` the
request figures are summed over the workers (prometheus-client's multiprocess mode, set up by
``saihm serve``); the store figures are read from LMDB at scrape time and are the same whichever
worker answers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Handler

from saihm import __version__
from saihm.http.common import answered
from saihm.storage.base import StorageError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Histogram
    from prometheus_client.metrics_core import Metric

    from saihm.store import Store

__all__ = [
    "METRICS",
    "REASONS",
    "Metrics",
    "OpsFigures",
    "add_ops_routes",
    "figures",
    "not_ready_reason",
]

#: Why /readyz answers 503.
#: Consecutive failures of one background job after which the operator is not ready.
JOB_FAILURES = 3
REASONS = {
    "store_unavailable": "the storage does not answer a read",
    "checkpointer_stopped": "the background checkpoint thread is not running",
    "checkpoint_stale": "entries have waited longer than the staleness bound for a checkpoint",
    "kek_rotation_overdue": "the KEK generation in force is older than the rotation schedule "
    "plus its grace period",
    "background_job_failing": "a background job (checkpoint or KEK schedule) has failed "
    f"{JOB_FAILURES} times in a row (Store.job_health)",
}
#: A checkpoint is stale when uncovered entries have waited this many checkpoint intervals
#: (and at least :data:`STALE_MIN_SECONDS`).
STALE_INTERVALS = 10
STALE_MIN_SECONDS = 30.0
#: How late a scheduled KEK rotation may be before the operator is not ready.
KEK_GRACE_SECONDS = 600.0
#: The only values the ``method`` label takes; anything else is counted as "other".
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
#: Request latency buckets in seconds (a remember costs two ML-DSA-65 signatures, ~2 ms).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class OpsFigures:
    """What the store says about itself, read in one read snapshot of its storage, and the
    storage's space in use and the limit it may grow to (``Storage.usage``; None: no limit)."""

    log_size: int
    checkpoint_size: int
    kek_version: int
    kek_age_seconds: float
    checkpoint_age_seconds: float
    checkpointer_alive: bool
    caches: dict[str, int]
    storage_used_bytes: int = 0
    storage_limit_bytes: int | None = None


def figures(store: Store, now: float | None = None) -> OpsFigures:
    """Read the figures behind readiness and metrics; raises ``StorageError`` when the store
    does not answer.

    ``checkpoint_age_seconds`` is 0 while the latest checkpoint covers the whole log, and
    otherwise the time since this process last signed a checkpoint: how long the public head
    has lagged the log.
    """
    now = time.time() if now is None else now
    size, checkpoint_size = store.log_sizes()
    usage = store.usage()
    kek_version = store.kek_version
    kek_age = store.kek_age(now)
    signed_at = store.public_log.last_signed
    lag_age = 0.0 if checkpoint_size >= size else max(0.0, store.clock() - signed_at)
    jobs = store.background
    caches = {
        "holder_keys": len(store.holder_keys.cached),
        "tokens": store.authenticator.cached_tokens,
    }
    return OpsFigures(
        log_size=size,
        checkpoint_size=checkpoint_size,
        kek_version=kek_version,
        kek_age_seconds=kek_age,
        checkpoint_age_seconds=lag_age,
        checkpointer_alive=jobs is not None and jobs.alive(),
        caches=caches,
        storage_used_bytes=usage.used,
        storage_limit_bytes=usage.limit,
    )


def not_ready_reason(store: Store, now: float | None = None) -> str | None:
    """None when the operator is ready, else a key of :data:`REASONS`.

    This is the one place readiness is decided, from the store's figures and its background
    jobs' health (:meth:`saihm.store.Store.job_health`).
    """
    from saihm.errors import SaihmError

    try:
        got = figures(store, now)
    except SaihmError:  # StorageError is one
        return "store_unavailable"
    health = store.job_health()
    if any(job["consecutive_failures"] >= JOB_FAILURES for job in health.values()):  # type: ignore[operator]
        return "background_job_failing"
    config = store.config
    if not got.checkpointer_alive:
        return "checkpointer_stopped"
    bound = max(STALE_MIN_SECONDS, STALE_INTERVALS * config.checkpoint_interval)
    if got.checkpoint_age_seconds > bound:
        return "checkpoint_stale"
    hours = config.kek_rotation_hours
    if hours > 0 and got.kek_age_seconds > hours * 3600 + KEK_GRACE_SECONDS:
        return "kek_rotation_overdue"
    return None


class Metrics:
    """The request counter and latency histogram of one app, and the scrape of store figures.

    Each app has its own registry (nothing is registered at import time). In multiprocess mode
    (``PROMETHEUS_MULTIPROC_DIR`` set before prometheus-client is first imported) the request
    figures of every worker are read back from the shared directory at scrape time.
    """

    def __init__(self, store_figures: Callable[[], OpsFigures]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self._figures = store_figures
        self.registry: CollectorRegistry = CollectorRegistry(auto_describe=True)
        self.multiprocess_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        self.requests: Counter = Counter(
            "saihm_http_requests",
            "HTTP requests answered, by method and status code.",
            ["method", "status"],
            registry=None if self.multiprocess_dir else self.registry,
        )
        self.latency: Histogram = Histogram(
            "saihm_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and status code.",
            ["method", "status"],
            buckets=BUCKETS,
            registry=None if self.multiprocess_dir else self.registry,
        )

    def observe(self, method: str, status: int, seconds: float) -> None:
        """Count one answered request; the method label is one of :data:`METHODS`."""
        label = method if method in METHODS else "other"
        self.requests.labels(label, str(status)).inc()
        self.latency.labels(label, str(status)).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        """The exposition body and its content type, with the store read now."""
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        registry = self.registry
        if self.multiprocess_dir:
            from prometheus_client.multiprocess import MultiProcessCollector

            registry = CollectorRegistry()
            MultiProcessCollector(registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        registry.register(_StoreCollector(self._figures))
        try:
            return generate_latest(registry), CONTENT_TYPE_LATEST
        finally:
            for collector in list(registry._collector_to_names):
                if isinstance(collector, _StoreCollector):
                    registry.unregister(collector)


class _StoreCollector:
    """Gauges read from the store at scrape time (identical from every worker)."""

    def __init__(self, store_figures: Callable[[], OpsFigures]) -> None:
        self._figures = store_figures

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

        yield InfoMetricFamily("saihm_build", "The running saihm.", value={"version": __version__})
        try:
            got = self._figures()
        except StorageError:
            yield GaugeMetricFamily("saihm_store_up", "1 when the store answers a read.", 0)
            return
        yield GaugeMetricFamily("saihm_store_up", "1 when the store answers a read.", 1)
        lag = got.log_size - got.checkpoint_size
        gauges = [
            ("saihm_log_entries", "Leaves in the log (its tree size).", got.log_size),
            (
                "saihm_checkpoint_entries",
                "Tree size of the latest checkpoint.",
                got.checkpoint_size,
            ),
            ("saihm_checkpoint_lag_entries", "Leaves no signed checkpoint covers yet.", lag),
            (
                "saihm_checkpoint_age_seconds",
                "How long the latest checkpoint has lagged the log (0 while it covers every leaf).",
                got.checkpoint_age_seconds,
            ),
            ("saihm_kek_generation", "The KEK generation in force.", got.kek_version),
            (
                "saihm_kek_age_seconds",
                "Seconds since the KEK generation in force was issued (the last KEK rotation).",
                got.kek_age_seconds,
            ),
            (
                "saihm_checkpointer_up",
                "1 while the background checkpoint thread runs.",
                int(got.checkpointer_alive),
            ),
            (
                "saihm_storage_used_bytes",
                "Space the storage uses (Storage.usage).",
                got.storage_used_bytes,
            ),
        ]
        if got.storage_limit_bytes is not None:
            gauges.append(
                (
                    "saihm_storage_limit_bytes",
                    "Space the storage may grow to (the LMDB map ceiling, map_size_max).",
                    got.storage_limit_bytes,
                )
            )
        for name, text, value in gauges:
            yield GaugeMetricFamily(name, text, value)
        cache = GaugeMetricFamily(
            "saihm_cache_entries", "Entries held in an in-process cache.", labels=["cache"]
        )
        for name, count in sorted(got.caches.items()):
            cache.add_metric([name], count)
        yield cache


METRICS: web.AppKey[Metrics] = web.AppKey("saihm.metrics", Metrics)


async def healthz(request: web.Request) -> web.Response:
    """``GET /healthz``: 200 while the process serves requests (liveness)."""
    from saihm.http.common import json_response

    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """``GET /readyz``: 200 when ready to serve, 503 with ``{"reason"}`` otherwise."""
    from saihm.http.common import OPERATOR, json_response, run_sync

    store = request.app[OPERATOR].store
    reason = await run_sync(request, not_ready_reason, store)
    if reason is None:
        return json_response({"status": "ready"})
    return json_response({"status": "not_ready", "reason": reason}, status=503)


async def metrics(request: web.Request) -> web.Response:
    """``GET /metrics``: Prometheus text exposition format."""
    from saihm.http.common import run_sync

    body, content_type = await run_sync(request, request.app[METRICS].render)
    response = web.Response(body=body, headers={"Cache-Control": "no-store"})
    response.headers["Content-Type"] = content_type
    return response


@web.middleware
async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count every answered request by method and status (the error middleware runs inside
    this one, so failures are counted with the status the client saw)."""

    def count(status: int, seconds: float) -> None:
        request.app[METRICS].observe(request.method, status, seconds)

    return await answered(request, handler, count)


def add_ops_routes(app: web.Application, store: Store) -> None:
    """Add /healthz, /readyz and /metrics, and the middleware that counts requests."""
    app[METRICS] = Metrics(lambda: figures(store))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
