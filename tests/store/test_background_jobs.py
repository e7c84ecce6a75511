"""The store's background jobs are started by the composition root, never by opening a store,
and a close stops them before the storage closes (issue 12: "background jobs (checkpointer,
KEK scheduler) started by the composition root, not by ``Store.__init__``")."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from saihm.compose import initialise, open_operator
from saihm.config import Config
from saihm.store import Store


def _poll(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


def _jobs_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "saihm-jobs"]


@pytest.fixture
def config(tmp_path):
    config = Config.for_data(tmp_path / "data", checkpoint_interval=0.01)
    initialise(config)
    return config


def _pool_thread(thread: threading.Thread) -> bool:
    """A thread of the PostgreSQL driver's connection pool (psycopg_pool names them after the
    pool, ``saihm``): the storage's, not a job of the store."""
    return thread.name == "saihm-scheduler" or thread.name.startswith("saihm-worker-")


def test_opening_a_store_starts_no_thread(config) -> None:
    before = set(threading.enumerate())
    store = Store(config)
    try:
        assert store.background is None
        started = set(threading.enumerate()) - before
        if store.storage.kind != "lmdb":
            started = {t for t in started if not _pool_thread(t)}
        assert started == set()
        assert all(j["last_success"] is None for j in store.job_health().values())
    finally:
        store.close()


def test_open_operator_starts_the_jobs_and_without_checkpointer_does_not(config) -> None:
    quiet = open_operator(config, checkpointer=False)
    try:
        assert quiet.store.background is None and _jobs_threads() == []
    finally:
        quiet.store.close()
    operator = open_operator(config)
    try:
        jobs = operator.store.background
        assert jobs is not None and jobs.alive()
        health = operator.store.job_health
        _poll(lambda: health()["checkpoint"]["last_success"] is not None, "a checkpoint tick")
        _poll(lambda: health()["kek_rotation"]["last_success"] is not None, "a KEK check")
    finally:
        operator.store.close()
    assert not jobs.alive() and _jobs_threads() == []


def test_close_waits_for_a_running_tick_before_the_storage_closes(config, caplog) -> None:
    """A checkpoint tick under way when close begins finishes on an open storage: close joins
    the thread first, so a clean shutdown logs no failed job."""
    caplog.set_level(logging.ERROR)
    store = Store(config)
    entered, release = threading.Event(), threading.Event()
    seen: list[int] = []
    real = store.checkpoint_now

    def slow_checkpoint() -> bytes:
        entered.set()
        release.wait(30)
        seen.append(store.size())  # reads the storage: fails if it were closed
        return real()

    store.checkpoint_now = slow_checkpoint  # type: ignore[method-assign]
    jobs = store.start_jobs()
    assert entered.wait(30)
    closing = threading.Thread(target=store.close)
    closing.start()
    _poll(lambda: jobs._stop.is_set(), "close asked the jobs to stop")
    assert closing.is_alive() and seen == []  # close is waiting on the tick
    release.set()
    closing.join(30)
    assert not closing.is_alive() and not jobs.alive()
    assert seen == [0, 0]  # the tick's, then close's final checkpoint
    assert [r for r in caplog.records if "failed" in r.getMessage()] == []
