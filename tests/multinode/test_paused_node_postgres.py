"""A paused node does not stop the other nodes' writes (issues 21 and 32; docs/scaling.md "A
node that stops mid-write").

The last test freezes a node idle inside its write transaction, lock held, and checks that the
other node goes at most 6 s without an acknowledged write, answers no 503, and loses nothing.
The first, below:

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

from saihm.storage._pgschema import lock_key
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


def _waiting_for_the_write_lock(conn: psycopg.Connection, application: str) -> list[int]:
    """The pids of ``application``'s sessions waiting for an advisory lock."""
    rows = conn.execute(
        "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = %s",
        (application,),
    ).fetchall()
    return [int(pid) for (pid,) in rows]


def _session_of(conn: psycopg.Connection, pid: int) -> tuple[str, bool] | None:
    """(state, holds an advisory lock) of backend ``pid``, None once the server ended it."""
    row = conn.execute(
        "SELECT a.state, EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid"
        " AND l.locktype = 'advisory' AND l.granted)"
        " FROM pg_stat_activity a WHERE a.pid = %s",
        (pid,),
    ).fetchone()
    return None if row is None else (str(row[0]), bool(row[1]))


FROZEN_BOUND = 6.0  # seconds without an acknowledged write on the other node (issue 32)


def test_a_node_frozen_holding_the_write_lock_costs_the_others_seconds_and_loses_nothing(
    tmp_path: Path, postgres_location: str
) -> None:
    """Node A is frozen (SIGSTOP) holding the write lock, idle inside its write transaction:
    the realistic frozen writer, whose session the server must end by itself. The test makes
    it deterministic: it holds the store's write lock itself, sends a remember through A and
    waits until A's session queues for the lock; stops A; releases the lock, so A's session
    is granted it, runs the first read A had sent with it, and waits, idle in its transaction,
    for a stopped process. Node B then writes in a loop. The server ends A's session after
    ``idle_in_transaction_session_timeout`` (WRITE_TIMEOUTS), releasing the lock, and B's
    writes go through while A is still stopped: B goes at most FROZEN_BOUND seconds without an
    acknowledged write, and answers no 503 (its ``lock_timeout`` is longer than the idle
    limit). Resumed, A answers the remember it was making 503 (nothing of it stored; its
    session is gone) and serves the next one. Every acknowledged write is there."""
    url = postgres_location
    application = "saihm-node-a"
    # A waits for the test's lock as long as the test needs; its idle limit is the driver's.
    url_a = with_settings(url, lock_timeout="60s") + f"&application_name={application}"
    data = tmp_path / "data"
    acked: list[str] = []
    refused: list[str] = []
    # A signs no checkpoint after its first (an hour's interval): its one write transaction in
    # the test is the remember it is frozen in, not a checkpoint queued behind it.
    a_args = ("--data", str(data), "--checkpoint-interval", "3600")
    with (
        serving(tmp_path, *a_args, env={"SAIHM_STORE": url_a}, name="a") as (node_a, http_a),
        serving(tmp_path, "--data", str(data), env={"SAIHM_STORE": url}, name="b") as (_, http_b),
    ):
        token = holder_create(data, "--store", url)["token"]

        def remember(http: str, content: str) -> tuple[int, object, float]:
            status, answer, took = _call(http, token, "saihm_remember", {"content": content})
            (acked if status == 200 else refused).append(content)
            return status, answer, took

        assert remember(http_a, "before, through A")[0] == 200
        assert remember(http_b, "before, through B")[0] == 200

        frozen: list[tuple[int, object, float]] = []
        b_calls: list[tuple[float, int, object]] = []  # (answered at, status, answer)
        with (
            psycopg.connect(url, autocommit=True) as watcher,
            psycopg.connect(url, autocommit=True) as blocker,
        ):
            (schema,) = watcher.execute("SELECT current_schema()").fetchone() or ("",)
            blocker.execute("SELECT pg_advisory_lock(%s)", (lock_key("write", str(schema)),))
            a_call = threading.Thread(
                target=lambda: frozen.append(remember(http_a, "frozen, through A"))
            )
            a_call.start()
            waiting: list[int] = []

            def a_waits_for_the_lock() -> bool:
                waiting[:] = _waiting_for_the_write_lock(watcher, application)
                return bool(waiting)

            _until(a_waits_for_the_lock, "node A's write waiting for the lock")
            assert len(waiting) == 1, waiting  # one frozen writer, not a queue of them
            pid_a = waiting[0]
            node_a.send_signal(signal.SIGSTOP)
            try:
                blocker.execute("SELECT pg_advisory_unlock_all()")
                released = time.monotonic()
                # A's session is granted the lock, answers A's first read into a stopped
                # process, and waits idle in its transaction: the frozen writer.
                _until(
                    lambda: _session_of(watcher, pid_a) in (("idle in transaction", True), None),
                    "A's session holding the lock, idle in its transaction",
                )
                stop = threading.Event()

                def b_writes() -> None:
                    n = 0
                    while not stop.is_set():
                        n += 1
                        status, answer, _ = remember(http_b, f"B's write {n} while A is frozen")
                        b_calls.append((time.monotonic(), status, answer))

                b_writer = threading.Thread(target=b_writes)
                b_writer.start()
                try:
                    _until(
                        lambda: sum(s == 200 for _, s, _ in b_calls) >= 3,
                        "three writes through B while A is frozen",
                    )
                    # The server ended A's session (A never ran meanwhile): that is what
                    # released the lock.
                    assert _session_of(watcher, pid_a) is None
                finally:
                    stop.set()
                    b_writer.join(ANSWER + 5)
            finally:
                node_a.send_signal(signal.SIGCONT)
            a_call.join(ANSWER + 5)
            assert not a_call.is_alive()

        first_ack = min(at for at, status, _ in b_calls if status == 200)
        outage = first_ack - released
        print(f"frozen writer: B's first acknowledged write {outage:.2f} s after the freeze")
        assert outage <= FROZEN_BOUND
        assert [(s, a) for _, s, a in b_calls if s != 200] == []
        # Resumed, A finds its session ended: the write it was making is refused, not stored.
        assert [(s, a) for s, a, _ in frozen] == [(503, UNAVAILABLE)]
        status, answer, _ = remember(http_a, "after the freeze, through A")
        assert status == 200, answer

        for http in (http_a, http_b):
            status, cells, _ = _call(http, token, "saihm_recall", {"limit": 10_000})
            assert status == 200, cells
            assert isinstance(cells, list)
            assert sorted(cell["plaintext"] for cell in cells) == sorted(acked)
        assert refused == ["frozen, through A"]
        assert len(acked) >= 6
