"""What only the PostgreSQL driver has: URLs with passwords, schemas, several nodes starting at
once, connections the server ends, the settling of a commit whose connection broke, and the
write lock's limits (a writer that waits too long, a writer that stops mid-transaction)."""

from __future__ import annotations

import logging
import secrets
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from urllib.parse import quote

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from saihm.storage import StorageError, open_storage
from saihm.storage._pgurl import options_settings, safe_location
from saihm.storage.postgres import WRITE_TIMEOUTS, PostgresStorage, _Write
from tests.storage.conftest import NS, child
from tests.support.postgres import fresh_location, require_url, with_schema, with_settings

SECRET = "s3cr3t-Pa55word"


@pytest.fixture
def url() -> Iterator[str]:
    """A fresh schema, whose sessions carry an application name of their own: the test server
    is shared (other runs, other checkouts), and :func:`terminate_sessions` must end this
    test's sessions only."""
    with fresh_location() as location:
        yield own_sessions(location)


def own_sessions(url: str) -> str:
    """``url`` naming its sessions ``saihm-test-HEX`` (libpq's ``application_name``)."""
    return f"{url}&application_name=saihm-test-{secrets.token_hex(6)}"


def admin(url: str, statement: str, params: tuple[object, ...] = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def with_password(url: str, password: str, *, in_query: bool = False) -> str:
    """``url`` with its password replaced by ``password`` (in the user part or the query)."""
    scheme, rest = url.split("://", 1)
    userinfo, hosts = rest.split("@", 1)
    user = userinfo.split(":", 1)[0]
    if in_query:
        sep = "&" if "?" in hosts else "?"
        return f"{scheme}://{user}@{hosts}{sep}password={quote(password)}"
    return f"{scheme}://{user}:{quote(password, safe='')}@{hosts}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("postgresql://u:pw@h:5432/db", "postgresql://u@h:5432/db"),
        ("postgresql://u:p%40w@h/db?sslmode=require", "postgresql://u@h/db?sslmode=require"),
        (
            "postgres://u@h/db?password=pw&application_name=x",
            "postgres://u@h/db?application_name=x",
        ),
        ("postgresql://h1:1,h2:2/db", "postgresql://h1:1,h2:2/db"),
        ("postgresql:///db?host=/run/pg&sslpassword=k", "postgresql:///db?host=%2Frun%2Fpg"),
    ],
)
def test_the_location_carries_no_password(given: str, shown: str) -> None:
    location, secrets = safe_location(given)
    assert location == shown
    for secret in secrets:
        assert secret not in location


@pytest.mark.parametrize("in_query", [False, True])
def test_no_password_reaches_location_repr_errors_or_logs(
    url: str, in_query: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """With a wrong password (authentication fails) and with a port nobody listens on, the
    error says what failed and where, and neither it, its traceback, nor any log line of
    any logger holds the password."""
    caplog.set_level(logging.DEBUG)
    wrong = with_password(url, SECRET, in_query=in_query)
    closed = wrong.replace(wrong.split("@", 1)[1].split("/", 1)[0], f"127.0.0.1:{free_port()}")
    for target, reason in ((wrong, "password authentication failed"), (closed, "refused")):
        with pytest.raises(StorageError) as caught:
            open_storage(target, NS)
        message = str(caught.value)
        assert reason in message
        assert "PostgreSQL at postgresql://" in message
        text = "".join(traceback.format_exception(caught.value))
        assert SECRET not in text and quote(SECRET) not in text
    for record in caplog.records:
        assert SECRET not in record.getMessage()


def test_an_open_storage_shows_no_password(url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    password = url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    storage = open_storage(url, NS)
    try:
        assert password not in storage.location
        assert password not in repr(storage)
        with storage.write() as txn:
            txn.put(b"k", b"v", db=storage.namespace(b"main"))
        with pytest.raises(StorageError) as caught, storage.write() as txn:
            txn.put_many([(b"\x00", b"v")], db=storage.namespace(b"main"), append=True)
        assert password not in str(caught.value)
    finally:
        storage.close()
    assert all(password not in r.getMessage() for r in caplog.records)


def test_a_malformed_url_is_a_storage_error_without_the_password() -> None:
    with pytest.raises(StorageError) as caught:
        open_storage(f"postgresql://u:{SECRET}@127.0.0.1:notaport/db", NS)
    assert SECRET not in "".join(traceback.format_exception(caught.value))


def test_a_search_path_naming_no_schema_is_refused() -> None:
    target = with_schema(require_url(), "saihm_no_such_schema")
    with pytest.raises(StorageError, match="no schema"):
        open_storage(target, NS)


def test_the_schema_is_versioned_and_another_version_is_refused(url: str) -> None:
    open_storage(url, NS).close()
    assert admin(url, "SELECT value FROM saihm_meta WHERE key = 'schema_version'") == [("1",)]
    admin(url, "UPDATE saihm_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StorageError, match="schema version 99"):
        open_storage(url, NS)


def test_namespaces_added_later_keep_what_was_written(url: str) -> None:
    first = open_storage(url, NS)
    with first.write() as txn:
        txn.put(b"k", b"v", db=first.namespace(b"main"))
    first.close()
    wider = open_storage(url, (b"new", *NS))
    try:
        with wider.read() as snap:
            assert snap.get(b"k", db=wider.namespace(b"main")) == b"v"
            assert snap.count(wider.namespace(b"new")) == 0
    finally:
        wider.close()
    names = admin(url, "SELECT name FROM saihm_namespace ORDER BY id")
    assert [bytes(n) for (n,) in names] == [b"main", b"other", b"new"]


def test_read_only_on_an_empty_schema_creates_nothing(url: str) -> None:
    storage = open_storage(url, NS, readonly=True)
    try:
        with storage.read() as snap:
            assert snap.count(storage.namespace(b"main")) == 0
            assert snap.last(storage.namespace(b"main")) is None
        with pytest.raises(StorageError):
            storage.write()
    finally:
        storage.close()
    assert admin(url, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()") == [
        (0,)
    ]


def test_nodes_starting_at_once_create_one_schema(url: str) -> None:
    """Four processes open a fresh schema at the same moment (the advisory lock orders their
    CREATE TABLE IF NOT EXISTS) and each commits."""
    procs = [child(url, "put", f"{i:02x}", "01") for i in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    storage = open_storage(url, NS)
    try:
        with storage.read() as snap:
            assert [k for k, _ in snap.scan(storage.namespace(b"main"))] == [
                bytes([i]) for i in range(4)
            ]
    finally:
        storage.close()
    assert admin(url, "SELECT count(*) FROM saihm_namespace") == [(len(NS),)]


def test_two_schemas_are_two_storages_with_their_own_write_lock(url: str) -> None:
    with fresh_location() as second:
        proc = child(url, "hold-until-line", b"held".hex())
        assert proc.stdout is not None and proc.stdin is not None
        try:
            assert proc.stdout.readline().strip() == "holding"
            # The first schema's write transaction is held: the second's is not affected.
            other = open_storage(second, NS)
            try:
                with other.write() as txn:
                    txn.put(b"k", b"second", db=other.namespace(b"main"))
                with other.read() as snap:
                    assert snap.get(b"held", db=other.namespace(b"main")) is None
            finally:
                other.close()
            proc.stdin.write("commit\n")
            proc.stdin.flush()
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def terminate_sessions(url: str) -> int:
    """End every session opened with ``url`` (its own ``application_name``, see
    :func:`own_sessions`), as a server restart would. Never every ``saihm`` session of the
    database: on a shared test server that fails whatever other runs have in flight."""
    name = conninfo_to_dict(url).get("application_name")
    assert name and str(name).startswith("saihm-test-"), "the url fixture names its sessions"
    rows = admin(
        url,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = %s AND datname = current_database() "
        "AND pid <> pg_backend_pid()",
        (str(name),),
    )
    return int(rows[0][0])


def test_ending_a_tests_sessions_spares_other_storages_on_the_server(url: str) -> None:
    """Another run's storage on the same server (default application name, its own schema)
    keeps its sessions when this test ends its own."""
    with fresh_location() as elsewhere:
        bystander = PostgresStorage(elsewhere, NS)
        storage = PostgresStorage(url, NS)
        try:
            for each in (bystander, storage):
                with each.write() as txn:
                    txn.put(b"k", b"v", db=each.namespace(b"main"))
            theirs, ours = bystander.read(), storage.read()
            assert terminate_sessions(url) >= 1
            with pytest.raises(StorageError):
                ours.get(b"k", db=storage.namespace(b"main"))
            assert theirs.get(b"k", db=bystander.namespace(b"main")) == b"v"
            theirs.close()
            ours.close()
        finally:
            storage.close()
            bystander.close()


def test_sessions_the_server_ends_become_storage_errors_then_are_replaced(url: str) -> None:
    storage = PostgresStorage(url, NS, pool_size=4)
    try:
        main = storage.namespace(b"main")
        with storage.write() as txn:
            txn.put(b"k", b"v", db=main)
        snaps = [storage.read() for _ in range(3)]  # three pooled connections in use
        for snap in snaps:
            assert snap.get(b"k", db=main) == b"v"
        assert terminate_sessions(url) >= 3
        with pytest.raises(StorageError):
            snaps[0].get(b"k", db=main)
        for snap in snaps:
            snap.close()
        # Every pooled connection is now broken; the next transactions get working ones.
        with storage.read() as snap:
            assert snap.get(b"k", db=main) == b"v"
        with storage.write() as txn:
            txn.put(b"k", b"w", db=main)
        with storage.read() as snap:
            assert snap.get(b"k", db=main) == b"w"
    finally:
        storage.close()


def test_a_commit_whose_connection_broke_is_settled_by_the_server(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The COMMIT reached the server but its answer was lost: the driver asks the server
    what became of the transaction instead of reporting a failure for a durable write."""
    storage = open_storage(url, NS)
    assert isinstance(storage, PostgresStorage)
    try:
        main = storage.namespace(b"main")
        real = _Write._send_commit
        lost: list[str] = []

        def commit_then_lose_the_answer(self: _Write, conn: psycopg.Connection) -> str:  # type: ignore[type-arg]
            lost.append(real(self, conn))
            conn.pgconn.finish()  # the socket is gone: psycopg sees a broken connection
            raise psycopg.OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(_Write, "_send_commit", commit_then_lose_the_answer)
        with storage.write() as txn:
            txn.put(b"durable", b"1", db=main)
        assert lost == ["COMMIT"]  # no error above: the server says it committed
        monkeypatch.undo()
        with storage.read() as snap:
            assert snap.get(b"durable", db=main) == b"1"
    finally:
        storage.close()


def test_a_transaction_the_server_never_committed_is_reported(url: str) -> None:
    storage = open_storage(url, NS)
    assert isinstance(storage, PostgresStorage)
    try:
        main = storage.namespace(b"main")
        txn = storage.write()
        txn.put(b"lost", b"1", db=main)
        assert txn.get(b"other", db=main) is None  # the first read begins it on the server
        xid = txn._txid  # type: ignore[attr-defined]
        assert xid and xid != "0"
        terminate_sessions(url)
        with pytest.raises(StorageError):
            txn.commit()
        assert storage._committed(xid) is False
        with storage.read() as snap:
            assert snap.get(b"lost", db=main) is None
    finally:
        storage.close()


def test_the_options_settings_are_read_as_the_server_reads_them() -> None:
    assert options_settings("-c search_path=s -c lock_timeout=1s") == {
        "search_path",
        "lock_timeout",
    }
    assert options_settings("-csearch_path=s --Idle-In-Transaction-Session-Timeout=2s") == {
        "search_path",
        "idle_in_transaction_session_timeout",
    }
    assert options_settings("") == frozenset()
    assert options_settings("x-c a=1") == frozenset()


def within(seconds: float, action: Callable[[], object]) -> tuple[object, float]:
    """Run ``action`` in a thread; its result (or the exception it raised) and its duration.
    Fails the test if it has not finished after ``seconds`` (the thread is left to finish once
    the caller releases what it waits for)."""
    done: list[object] = []
    started = time.monotonic()

    def run() -> None:
        try:
            done.append(action())
        except Exception as err:
            done.append(err)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"no answer within {seconds:g} s")
    return done[0], time.monotonic() - started


def test_a_writer_waits_for_the_lock_at_most_lock_timeout(url: str) -> None:
    """A writer that another node's transaction keeps from the lock fails with a storage
    error after ``lock_timeout`` (WRITE_TIMEOUTS: 5 s) instead of waiting for ever. (The
    holder sets a long idle limit of its own: with the driver's, shorter than lock_timeout,
    the server would end its session first and the waiter would be granted the lock.)"""
    limit = float(dict(WRITE_TIMEOUTS)["lock_timeout"].removesuffix("s"))
    holder = PostgresStorage(with_settings(url, idle_in_transaction_session_timeout="60s"), NS)
    waiter = PostgresStorage(url, NS)
    txn = holder.write()

    def take_a_turn() -> None:
        with waiter.write() as other:  # the lock travels with the first read
            other.get(b"held", db=waiter.namespace(b"main"))

    try:
        txn.put(b"held", b"1", db=holder.namespace(b"main"))
        assert txn.get(b"nothing", db=holder.namespace(b"main")) is None
        outcome, took = within(limit + 20, take_a_turn)
        assert isinstance(outcome, StorageError), outcome
        assert "write lock was not granted within lock_timeout" in str(outcome)
        assert limit - 0.5 <= took < limit + 10
        txn.commit()
        with waiter.write() as other:  # the lock, once free, is granted as before
            other.put(b"after", b"2", db=waiter.namespace(b"main"))
    finally:
        txn.abort()
        holder.close()
        waiter.close()


@pytest.mark.parametrize("last", ["put", "get"])
def test_a_writer_that_stops_mid_transaction_loses_the_lock_and_its_write(
    url: str, last: str
) -> None:
    """A writer that stops talking mid-transaction (a paused node: its socket stays open) has
    its session ended by the server after ``idle_in_transaction_session_timeout``: its lock is
    released and another writer proceeds; the stopped one's commit then fails, nothing of it
    written, and its next transaction works. ``last`` is what it did before it stopped: a read
    the server answered (the first read takes the lock), or a write buffered after it."""
    stopping = PostgresStorage(with_settings(url, idle_in_transaction_session_timeout="1s"), NS)
    other = PostgresStorage(url, NS)
    main = stopping.namespace(b"main")
    txn = stopping.write()
    try:
        txn.put(b"lost", b"1", db=main)
        if last == "get":
            assert txn.get(b"lost", db=main) == b"1"
            assert txn.get(b"nothing", db=main) is None
        else:
            assert txn.get(b"nothing", db=main) is None
            txn.put(b"lost-too", b"1", db=main)
        # The stopped writer sends nothing more; the other's wait ends when the server ends
        # the stopped one's session (1 s), well within the other's lock_timeout (5 s).

        def write_other() -> None:
            with other.write() as t:
                t.put(b"other", b"2", db=other.namespace(b"main"))

        outcome, took = within(30, write_other)
        assert outcome is None, outcome
        assert took < 10
        with pytest.raises(StorageError):
            txn.commit()
        with stopping.write() as again:
            again.put(b"again", b"3", db=main)
        with stopping.read() as snap:
            assert snap.get(b"lost", db=main) is None
            assert snap.get(b"lost-too", db=main) is None
            assert snap.get(b"other", db=main) == b"2"
            assert snap.get(b"again", db=main) == b"3"
    finally:
        txn.abort()
        stopping.close()
        other.close()


def test_a_write_transaction_sends_its_writes_with_the_commit(url: str) -> None:
    """Writes are buffered and go with the COMMIT; the lock goes with the first read; a key
    read or written once is answered from memory (module docstring, "Round trips")."""
    storage = PostgresStorage(url, NS)
    try:
        main = storage.namespace(b"main")
        with storage.write() as txn:
            txn.put_many([(b"a", b"1"), (b"b", b"2")], db=main)
        before = storage.figures()
        with storage.write() as txn:
            assert txn.get(b"a", db=main) == b"1"  # round trip 1: BEGIN, lock, this read
            txn.put(b"c", b"3", db=main)
            assert txn.get(b"c", db=main) == b"3"  # from the buffer
            assert txn.get(b"a", db=main) == b"1"  # from memory
            assert txn.delete(b"c", db=main) is True
            assert txn.get(b"c", db=main) is None
            assert txn.put(b"a", b"x", db=main, overwrite=False) is False
            # Round trip 2: the namespace's newest key, which the append must exceed.
            txn.put_many([(b"d", b"4"), (b"e", b"5")], db=main, append=True)
            assert txn.last(main) == (b"e", b"5")  # known from the buffer
        cost = {name: value - before[name] for name, value in storage.figures().items()}
        assert cost["round_trips"] == 3  # ... and round trip 3: every write, then COMMIT
        assert cost["locked_round_trips"] == 2
        assert cost["rows_written"] == 3  # d and e, and c deleted (the server may hold one)
        assert 0 < cost["lock_seconds"] < 60
        # One thread's CPU time in the hold cannot exceed the hold itself.
        assert 0 <= cost["lock_cpu_seconds"] <= cost["lock_seconds"]
        with storage.read() as snap:
            assert list(snap.scan(main)) == [(b"a", b"1"), (b"b", b"2"), (b"d", b"4"), (b"e", b"5")]
    finally:
        storage.close()


def test_a_write_transaction_prefetches_what_the_previous_ones_read(url: str) -> None:
    storage = PostgresStorage(url, NS)
    try:
        main = storage.namespace(b"main")
        with storage.write() as txn:
            txn.put_many([(b"a", b"1"), (b"b", b"2")], db=main)
        for expected in (2, 1, 1):  # the first learns that b is read after a
            before = storage.figures()
            with storage.write() as txn:
                assert txn.get(b"a", db=main) == b"1"
                assert txn.get(b"b", db=main) == b"2"
                assert txn.last(main) == (b"b", b"2")
            locked = storage.figures()["locked_round_trips"] - before["locked_round_trips"]
            assert locked == expected + (expected == 2)  # the first also asks for the end
    finally:
        storage.close()


def test_keys_named_in_advance_are_read_with_the_lock(url: str) -> None:
    """``prefetch`` sends its keys with the first read: a get of one, a ``put`` with
    ``overwrite=False`` or a ``delete`` (which look first) then costs no round trip under
    the lock, and each answers as it would have from the server."""
    storage = PostgresStorage(url, NS)
    try:
        main, other = storage.namespace(b"main"), storage.namespace(b"other")
        with storage.write() as txn:
            txn.put_many([(b"a", b"1"), (b"gone", b"2")], db=main)
        before = storage.figures()
        with storage.write() as txn:
            txn.prefetch([(main, b"a"), (main, b"free"), (main, b"gone"), (other, b"a")])
            assert txn.get(b"a", db=main) == b"1"  # the first read: BEGIN, lock, every key
            assert txn.put(b"a", b"x", db=main, overwrite=False) is False
            assert txn.put(b"free", b"3", db=main, overwrite=False) is True
            assert txn.delete(b"gone", db=main) is True
            assert txn.get(b"a", db=other) is None
        cost = {name: value - before[name] for name, value in storage.figures().items()}
        assert cost["locked_round_trips"] == 1  # the first read's answer, the COMMIT's request
        with storage.read() as snap:
            assert list(snap.scan(main)) == [(b"a", b"1"), (b"free", b"3")]
        before = storage.figures()
        with storage.write() as txn:
            assert txn.get(b"a", db=main) == b"1"
            txn.prefetch([(main, b"free")])  # too late: read when it is asked for
            assert txn.get(b"free", db=main) == b"3"
        cost = {name: value - before[name] for name, value in storage.figures().items()}
        assert cost["locked_round_trips"] == 2
    finally:
        storage.close()


def waiting_for_a_lock(url: str) -> bool:
    """Whether a session of this test (its ``application_name``) waits for a lock."""
    name = conninfo_to_dict(url)["application_name"]
    rows = admin(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        " AND wait_event_type = 'Lock'",
        (name,),
    )
    return bool(rows[0][0])


def test_a_key_named_in_advance_is_read_after_the_lock_is_granted(url: str) -> None:
    """A writer that names a key in advance while another process holds the write lock and
    writes that key sees the other's write once granted the lock: its ``put`` with
    ``overwrite=False`` is refused, as without the prefetch (a wrapped DEK is never
    overwritten: ``Keyring.put_dek``)."""
    key = b"dek-of-a-cell"
    holding = child(url, "hold-until-line", key.hex())
    storage = PostgresStorage(url, NS)
    try:
        assert holding.stdout is not None and holding.stdin is not None
        assert holding.stdout.readline().strip() == "holding"
        main = storage.namespace(b"main")

        def put_if_free() -> bool:
            with storage.write() as txn:
                txn.prefetch([(main, key)])
                return txn.put(key, b"mine", db=main, overwrite=False)

        done: list[object] = []
        writer = threading.Thread(target=lambda: done.append(put_if_free()), daemon=True)
        writer.start()
        deadline = time.monotonic() + 30
        while not waiting_for_a_lock(url):
            assert time.monotonic() < deadline, "the writer never waited for the lock"
            assert writer.is_alive(), done
        holding.stdin.write("commit\n")
        holding.stdin.flush()
        assert holding.wait(30) == 0
        writer.join(30)
        assert done == [False]
        with storage.read() as snap:
            assert snap.get(key, db=main) == b"held"
    finally:
        if holding.poll() is None:
            holding.kill()
            holding.wait(30)
        storage.close()


def test_usage_after_the_server_ended_every_session_is_answered(url: str) -> None:
    """A pooled connection the server closed fails no later operation: ``usage`` (the
    health endpoint's and the rebuild's) gets a working connection, as reads and writes do."""
    storage = PostgresStorage(url, NS, pool_size=2)
    try:
        with storage.write() as txn:
            txn.put(b"k", b"v" * 1000, db=storage.namespace(b"main"))
        before = storage.usage().used
        assert before > 0
        assert terminate_sessions(url) >= 1  # the pooled connection is gone
        assert storage.usage().used == before
    finally:
        storage.close()
