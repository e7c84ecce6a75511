"""A paused node does not stop the other nodes' writes (issue 21; docs/scaling.md "A node
that stops mid-write").

Two real ``saihm serve --store URL`` processes share one PostgreSQL schema. Node A is made to
hold the write lock deterministically: the test locks ``saihm_kv`` against inserts, sends a
remember through A and waits until A's session holds the advisory write lock and waits for
the table; then A is stopped with SIGSTOP (its socket stays open, its kernel answers
keepalives). A remember through node B answers 503 once B's ``lock_timeout`` passes instead
of hanging. A's writes travel with its COMMIT (the driver sends them together), so once the
table is released the server finishes A's transaction without A, and releases the lock: B's
next remember is acknowledged while A is still stopped. Resumed with SIGCONT, A acknowledges
the remember the server committed for it and serves the next normally; every acknowledged
write is there. (A node stopped between its first read and its commit, idle in its
transaction, loses its session after ``idle_in_transaction_session_timeout``:
``tests/storage/test_postgres.py`` stops a writer there.) Node A's URL sets its own limits in
libpq's ``options`` (a 2 s idle limit, and a long lock wait so that A waits out the test's
table lock); node B runs with the driver's defaults (WRITE_TIMEOUTS).
"""

from __future__ import annotations

import functools
import json
import signal
import threading
import time
from pathlib import Path

import psycopg
import pytest

from saihm.storage.postgres import WRITE_TIMEOUTS
from tests.support.postgres import with_settings
from tests.support.serve import fetch, holder_create, serving, until

DEADLINE = 60.0  # seconds a bounded wait below may take on a loaded runner
ANSWER = 20.0  # seconds a client waits for an answer: "no answer" fails the test
B_LOCK_TIMEOUT = float(dict(WRITE_TIMEOUTS)["lock_timeout"].removesuffix("s"))
UNAVAILABLE = {"error": "operator_storage_unavailable"}


_until = functools.partial(until, seconds=DEADLINE)


def _call(url: str, token: str, method: str, params: dict) -> tuple[int, object, float]:
    """(status, answer, seconds) of one tool call; fails the test if no answer comes within
    ANSWER seconds (a hung node)."""
    body = json.dumps({"method": method, "params": params}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    started = time.monotonic()
    try:
        status, raw = fetch(url, data=body, headers=headers, timeout=ANSWER)
    except OSError as err:
        pytest.fail(f"{method} through {url}: no answer within {ANSWER:g} s ({err})")
    return status, json.loads(raw), time.monotonic() - started


def _a_holds_the_lock_and_waits(conn: psycopg.Connection) -> int | None:
    """The pid of node A's session that holds an advisory lock and waits for a table."""
    row = conn.execute(
        "SELECT held.pid FROM pg_locks held"
        " JOIN pg_locks waiting ON waiting.pid = held.pid"
        " JOIN pg_stat_activity act ON act.pid = held.pid"
        " WHERE held.locktype = 'advisory' AND held.granted"
        " AND waiting.locktype = 'relation' AND NOT waiting.granted"
        " AND act.application_name = 'saihm-node-a'"
    ).fetchone()
    return None if row is None else int(row[0])


def _lock_released(conn: psycopg.Connection, pid: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pg_locks WHERE pid = %s AND locktype = 'advisory' AND granted", (pid,)
    ).fetchone()
    return row is None


def test_a_paused_node_holding_the_write_lock_stops_no_other_node(
    tmp_path: Path, postgres_location: str
) -> None:
    url = postgres_location
    url_a = (
        with_settings(url, lock_timeout="60s", idle_in_transaction_session_timeout="2s")
        + "&application_name=saihm-node-a"
    )
    data = tmp_path / "data"
    acked: list[str] = []  # contents acknowledged by either node
    with (
        serving(tmp_path, "--data", str(data), env={"SAIHM_STORE": url_a}, name="a") as (
            node_a,
            http_a,
        ),
        serving(tmp_path, "--data", str(data), env={"SAIHM_STORE": url}, name="b") as (_, http_b),
    ):
        token = holder_create(data, "--store", url)["token"]

        def remember(http: str, content: str) -> tuple[int, object, float]:
            status, answer, took = _call(http, token, "saihm_remember", {"content": content})
            if status == 200:
                acked.append(content)
            return status, answer, took

        assert remember(http_a, "before, through A")[0] == 200
        assert remember(http_b, "before, through B")[0] == 200

        stopped: list[tuple[int, object, float]] = []
        with psycopg.connect(url, autocommit=True) as watcher, psycopg.connect(url) as blocker:
            # Inserts into the store's table wait for this lock: A's write, once it has the
            # write lock, waits here, inside its locked section.
            blocker.execute("LOCK TABLE saihm_kv IN SHARE MODE")
            a_call = threading.Thread(
                target=lambda: stopped.append(remember(http_a, "stopped, through A"))
            )
            a_call.start()
            pid_a: list[int] = []

            def a_holds_the_lock() -> bool:
                pid = _a_holds_the_lock_and_waits(watcher)
                pid_a.extend([] if pid is None else [pid])
                return pid is not None

            _until(a_holds_the_lock, "node A holding the write lock")
            node_a.send_signal(signal.SIGSTOP)
            try:
                # B cannot have the lock: it answers 503 once its lock_timeout (5 s) passes.
                status, answer, took = remember(http_b, "while A holds the lock, through B")
                assert (status, answer) == (503, UNAVAILABLE)
                assert B_LOCK_TIMEOUT - 0.5 <= took < B_LOCK_TIMEOUT + 10

                # A's blocked statement now completes and the COMMIT A sent with it runs:
                # the server ends A's transaction, and releases the lock, without A.
                blocker.commit()
                _until(lambda: _lock_released(watcher, pid_a[0]), "A's lock to be released")
                status, answer, _ = remember(http_b, "after A's lock was released, through B")
                assert status == 200, answer
            finally:
                node_a.send_signal(signal.SIGCONT)
            a_call.join(ANSWER + 5)
            assert not a_call.is_alive()

        # Resumed, A acknowledges the write the server committed while A was stopped.
        assert [s for s, _, _ in stopped] == [200]
        status, answer, _ = remember(http_a, "after the pause, through A")
        assert status == 200, answer

        # Every acknowledged write is there, through either node; the refused one is not.
        for http in (http_a, http_b):
            status, cells, _ = _call(http, token, "saihm_recall", {"limit": 1000})
            assert status == 200, cells
            assert isinstance(cells, list)
            held = sorted(cell["plaintext"] for cell in cells)
            assert held == sorted(acked)
        assert len(acked) == 5 and "stopped, through A" in acked
