"""The PostgreSQL driver of the storage interface: several operator nodes on one database.

**Layout.** Every namespace lives in one table, ``saihm_kv (ns integer, k bytea, v bytea,
PRIMARY KEY (ns, k))``, in the schema the URL's ``search_path`` selects (``public`` unless
``?options=-csearch_path%3DNAME``); ``saihm_namespace`` numbers the namespaces and
``saihm_meta`` holds the schema version. ``bytea`` compares as unsigned bytes, shorter first on
a common prefix: the interface's order, so a B-tree range scan is a scan of the namespace. The
tables are created at open, idempotently, under a transaction-level advisory lock (two nodes
starting at once would otherwise race inside ``CREATE TABLE IF NOT EXISTS``).

**One writer at a time: an advisory lock, not SERIALIZABLE.** The write transaction begins
``BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(K)`` (``K`` derived from
the schema name, so each schema is its own storage), sent with its first read (or with its
writes when it reads nothing: see "Round trips"), and the lock is held until the
transaction ends: committed, rolled back, or its connection gone (a node killed with ``kill -9``
releases it when the server sees the socket close; server-side TCP keepalives bound the wait
for a node that vanished silently). SERIALIZABLE with retry is not an option under this
interface: the store's write transaction signs receipts and assigns dense leaf indexes, and a
serialization failure at commit would need the caller's whole block re-run; with the lock two
writers never conflict, so there is nothing to retry. The isolation level matters: a
REPEATABLE READ snapshot is taken at the transaction's first statement, which is the lock
statement, so it would predate the commit of the writer we waited for and every
read-increment-write would lose updates. Under READ COMMITTED each later statement takes a
fresh snapshot, and because every writer holds the lock, those snapshots all show the same
state (everything committed before the lock was granted) plus this transaction's own writes:
one consistent state, as the interface promises. The lock statement also asks for the
transaction id, so a commit whose connection breaks is settled by ``pg_xact_status`` on a new
connection instead of being guessed.

**A node that stops mid-write** (paused by SIGSTOP, a debugger, a frozen VM) keeps its socket
open and its kernel answering keepalives, so without limits its lock would stop every node's
writes for as long as it stays stopped. The write transaction therefore sets (``SET LOCAL``,
so reads and other sessions are unaffected) the limits of :data:`WRITE_TIMEOUTS`:
``lock_timeout`` bounds the wait for the lock (a writer not granted it in time fails with
SQLSTATE 55P03: nothing written, HTTP 503), and ``idle_in_transaction_session_timeout`` makes
the server end the session of a writer that has stopped talking to it mid-transaction, which
rolls that transaction back and releases its lock. The idle limit (3 s) is below the lock
wait (5 s), so a write queued behind a frozen writer is granted the lock when the server ends
the frozen writer's session rather than refused (docs/scaling.md gives the measured cost). The
server arms the idle timer only when it
is ready for a query, that is after a Sync message; a pipeline that never syncs until COMMIT
would leave a stopped writer's session "active" for ever. So every statement of the write
transaction sent before its COMMIT is followed by a Sync (sent, not waited for: it costs no
round trip). A node resumed after its session was ended finds its connection gone: that write
fails (nothing of it was committed) and the pool replaces the connection. A node stopped after
it sent its COMMIT holds nothing: the writes and the COMMIT are already in the server's hands,
which finishes the transaction and releases the lock without it. ``statement_timeout`` is not set: a
statement waiting for a lock is bounded by ``lock_timeout``, and the few long statements
(clearing a large projection in a rebuild) are legitimate. Each limit may be set for the node
in the URL's ``options`` (``?options=-c%20lock_timeout%3D2s``); a setting given there wins.

**Read snapshots** are ``REPEATABLE READ READ ONLY`` transactions whose snapshot is taken at
:meth:`PostgresStorage.read` (the ``BEGIN`` travels with a ``SELECT`` in one round trip), so a
snapshot never sees a commit made after it began. Scans page through the range with keyset
pagination (pages grow from 32 to 1024 rows), so memory stays bounded on any namespace.

**Round trips.** Connections come from a ``psycopg_pool.ConnectionPool``; a transaction takes
one for its life. Hot statements are prepared on each connection; parameters and results
travel in binary. Beginning a read snapshot is one round trip, and so is each get, scan page,
``last`` and ``count`` in it. Every node's writes wait for the write lock in turn, so the
write transaction keeps round trips out of the time it holds it (:class:`_Write`): nothing is
sent at :meth:`PostgresStorage.write`; writes are buffered in memory, reads see the buffer
first, and at commit every buffered write goes as one ``INSERT ... SELECT FROM unnest(...)
ON CONFLICT DO UPDATE`` and one ``DELETE ... USING unnest(...)``, pipelined with the COMMIT
(one round trip; a write's error, a full disk say, is raised by the commit, and nothing of the
transaction is written). The first read sends BEGIN, the limits and the lock with itself, in
one round trip, together with a prefetch of the keys and namespace ends that the storage's
last two write transactions read and of the keys the caller named in advance
(:meth:`_Write.prefetch`: the group commit names the fresh keys a batch must find free, such
as each new cell's wrapped-DEK key); a key read or written once is answered from memory for
the rest of the transaction. So a transaction that reads what the one before it read (a
remember's counters, tree size and newest tile) and the keys it named holds the lock for two
round trips, whatever its batch: the answer to its first read, and the request of its COMMIT.
A range read (scan, count, ``last`` of a prefix) first sends its namespace's buffered writes
(queued before it: no round trip of its own), and so does a buffer past ``_FLUSH_ROWS`` rows,
so memory stays bounded in a large transaction.
:meth:`PostgresStorage.figures` counts statements, round trips, round trips under the lock and
the time the lock was held, for ``saihm bench store``.

**Errors.** Every psycopg error becomes :class:`StorageError`; disk full (SQLSTATE 53100)
becomes :class:`StorageFull`, and :meth:`PostgresStorage.grow` returns False (the database
grows by itself until its disk is full; only an operator can add room). ``location``,
``repr`` and every message carry the URL with any password removed.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from types import TracebackType
from typing import Any, cast

import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.numeric import Int4

from saihm.storage._pgschema import (
    SCHEMA_VERSION,
    Statements,
    current_schema,
    lock_key,
    namespace_ids,
)
from saihm.storage._pgurl import options_settings, safe_location
from saihm.storage.base import (
    MAX_KEY,
    Namespace,
    StorageError,
    StorageFull,
    Usage,
    prefix_end,
    scan_bounds,
)

__all__ = ["SCHEMA_VERSION", "WRITE_TIMEOUTS", "PostgresStorage"]

log = logging.getLogger("saihm.storage")

_FIRST_PAGE = 32
_MAX_PAGE = 1024
_BATCH = 2000  # rows per INSERT or DELETE statement
_FLUSH_ROWS = 4096  # buffered writes sent before the commit once this many wait
_HOT_KEYS = 64  # keys a write transaction's reads teach the next one to prefetch
_KNOWN_MAX = 65_536  # values a write transaction keeps of what it read (then starts afresh)
_POOL_TIMEOUT = 15.0  # seconds to wait for a free connection
_DISK_FULL = "53100"
_LOCK_NOT_AVAILABLE = "55P03"
_IN_FAILED_TRANSACTION = "25P02"

#: The server-side limits of a write transaction (module docstring, "A node that stops"):
#: a few seconds' wait for the write lock, and a writer silent this long mid-transaction (far
#: above the gap between two statements of any batch: milliseconds of the node's own work) has
#: its session ended by the server. The idle limit is below the lock wait, so another node's
#: write that queued behind a frozen writer is granted the lock when the server ends the frozen
#: one's session, instead of being refused first. A setting the URL's ``options`` gives wins
#: over the value here.
WRITE_TIMEOUTS: tuple[tuple[str, str], ...] = (
    ("lock_timeout", "5s"),
    ("idle_in_transaction_session_timeout", "3s"),
)

# A dead node's connection must not hold the write lock for the kernel's two hours: the
# server probes a silent connection after 5 s, every second, and drops it after 3 unanswered
# probes, or when data it sent stays unacknowledged for 8 s (tcp_user_timeout, in ms).
_SESSION_SETUP = (
    "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 1; SET tcp_keepalives_count = 3;"
    " SET tcp_user_timeout = 8000"
)


def _check_key(key: bytes) -> None:
    """Refuse a key the interface does not allow (before it costs a round trip)."""
    if not 1 <= len(key) <= MAX_KEY:
        raise StorageError(f"a key must be 1 to {MAX_KEY} bytes")


def _findable(key: bytes) -> bool:
    """Whether ``key`` could be stored: an empty one is refused (as by LMDB), a longer one
    than :data:`MAX_KEY` is simply absent."""
    if not key:
        raise StorageError(f"a key must be 1 to {MAX_KEY} bytes")
    return len(key) <= MAX_KEY


_Slot = tuple[Int4, bytes]  # a namespace's handle and a key


class _Figures:
    """Running totals of what the storage's transactions cost (:meth:`PostgresStorage.figures`)."""

    NAMES = (
        "statements",
        "round_trips",
        "write_transactions",
        "write_statements",
        "locked_round_trips",
        "lock_seconds",
        "lock_cpu_seconds",
        "rows_written",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals = dict.fromkeys(self.NAMES, 0.0)

    def add(self, **amounts: float) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._totals[name] += amount

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._totals)


class _Read:
    """A read snapshot (also the base of the write transaction)."""

    def __init__(self, storage: PostgresStorage, conn: psycopg.Connection[Any]) -> None:
        self._storage = storage
        self._sql = storage._sql
        self._conn: psycopg.Connection[Any] | None = conn
        self._cur = conn.cursor(binary=True)
        self._failed = False
        self._statements = 0
        self._trips = 0
        #: What :meth:`prefetch` read: (namespace, key) -> value, and namespace -> its end.
        self._fetched: dict[tuple[int, bytes], bytes | None] = {}
        self._fetched_ends: dict[int, tuple[bytes, bytes] | None] = {}

    def prefetch(
        self, keys: Iterable[tuple[Namespace, bytes]], ends: Iterable[Namespace] = ()
    ) -> None:
        """Read ``keys`` (namespace, key) and the last pair of each namespace in ``ends`` in
        one statement, one round trip, so that a later :meth:`get` of one of those keys, or
        :meth:`last` of one of those namespaces without a prefix, is answered from memory:
        from the same snapshot, so with what it would have read."""
        wanted = list(
            dict.fromkeys(
                (cast(int, db.handle), key)
                for db, key in keys
                if db.handle is not None and _findable(key)
            )
        )
        tops = list(dict.fromkeys(cast(int, db.handle) for db in ends if db.handle is not None))
        if not wanted and not tops:
            return
        params = ([ns for ns, _ in wanted], [k for _, k in wanted], tops)
        rows = self._rows(self._sql.prefetch, params)
        fetched: dict[tuple[int, bytes], bytes | None] = dict.fromkeys(wanted)
        fetched_ends: dict[int, tuple[bytes, bytes] | None] = {}
        for ns, k, v, is_end in rows:
            if is_end:
                fetched_ends[int(ns)] = None if k is None else (bytes(k), bytes(v))
            else:
                fetched[int(ns), bytes(k)] = bytes(v)
        self._fetched.update(fetched)
        self._fetched_ends.update(fetched_ends)

    def _fail(self, err: Exception) -> StorageError:
        self._failed = True
        return self._storage._error(err)

    def _rows(self, query: sql.Composed, params: Sequence[object]) -> list[tuple[Any, ...]]:
        """Run ``query`` and fetch every row (in a write transaction, after the deferred
        writes before it: their errors are raised here)."""
        if self._conn is None:
            raise StorageError("the transaction has ended")
        try:
            cur = self._cur.execute(query, params, prepare=True)
            self._statements += 1
            self._trips += 1
            self._answered()
            return cur.fetchall()
        except psycopg.Error as err:
            raise self._fail(err) from None

    def _answered(self) -> None:
        """Called once a statement whose rows are wanted is sent: a read snapshot's
        statements are answered as they are sent, so there is nothing to do."""

    def _one(self, query: sql.Composed, params: Sequence[object]) -> tuple[Any, ...] | None:
        rows = self._rows(query, params)
        return rows[0] if rows else None

    def _end(self, commit: bool) -> None:
        conn = self._conn
        if conn is None:
            return
        self._conn = None
        # The snapshot's BEGIN travelled with its first statement (PostgresStorage.read).
        self._storage._figures.add(statements=self._statements + 2, round_trips=self._trips + 1)
        self._storage._finish(conn, commit=False, xid=None)

    def close(self) -> None:
        self._end(False)

    def __enter__(self) -> _Read:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._end(False)

    def get(self, key: bytes, *, db: Namespace) -> bytes | None:
        if not _findable(key) or db.handle is None:
            return None
        slot = (cast(int, db.handle), key)
        if slot in self._fetched:
            return self._fetched[slot]
        row = self._one(self._sql.get, (db.handle, key))
        return None if row is None else bytes(row[0])

    def scan(
        self,
        db: Namespace,
        start: bytes = b"",
        stop: bytes | None = None,
        *,
        prefix: bytes | None = None,
        reverse: bool = False,
    ) -> Iterator[tuple[bytes, bytes]]:
        bounds = scan_bounds(start, stop, prefix)
        if db.handle is None or bounds is None:
            return iter(())
        return self._pages(db.handle, *bounds, reverse)

    def _pages(
        self, ns: object, start: bytes, stop: bytes | None, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        """Keyset pagination: each page resumes after the last key of the one before."""
        size = _FIRST_PAGE
        strict = False
        while True:
            if reverse:
                # Descending pages: the bound moves down, ``start`` stays the floor.
                query = self._sql.scans[True, False, stop is not None]
            else:
                query = self._sql.scans[False, strict, stop is not None]
            params = (ns, start, stop, size) if stop is not None else (ns, start, size)
            rows = self._rows(query, params)
            for key, value in rows:
                yield bytes(key), bytes(value)
            if len(rows) < size:
                return
            if reverse:
                stop = bytes(rows[-1][0])
            else:
                start = bytes(rows[-1][0])
                strict = True
            size = min(size * 2, _MAX_PAGE)

    def last(self, db: Namespace, *, prefix: bytes | None = None) -> tuple[bytes, bytes] | None:
        if db.handle is None:
            return None
        if prefix is None and db.handle in self._fetched_ends:
            return self._fetched_ends[db.handle]
        start, stop = (b"", None) if prefix is None else (prefix, prefix_end(prefix))
        query = self._sql.scans[True, False, stop is not None]
        params = (db.handle, start, stop, 1) if stop is not None else (db.handle, start, 1)
        row = self._one(query, params)
        return None if row is None else (bytes(row[0]), bytes(row[1]))

    def count(self, db: Namespace) -> int:
        if db.handle is None:
            return 0
        row = self._one(self._sql.count, (db.handle,))
        return int(row[0]) if row else 0


class _Hot:
    """The keys and namespace ends the last two write transactions of this storage read.

    The next write transaction fetches them with its lock, in the same round trip, so a
    transaction that reads what the one before it read (the store's counters, the tree's
    newest tile, the tree size) waits for no other answer before its COMMIT. A key fetched
    needlessly costs the server one index probe; a key missed costs a round trip.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recent: deque[tuple[tuple[_Slot, ...], tuple[Int4, ...]]] = deque(maxlen=2)

    def learn(self, keys: Iterable[_Slot], ends: Iterable[Int4]) -> None:
        entry = (tuple(itertools.islice(keys, _HOT_KEYS)), tuple(ends))
        with self._lock:
            self._recent.append(entry)

    def wanted(self) -> tuple[dict[_Slot, None], dict[Int4, None]]:
        keys: dict[_Slot, None] = {}
        ends: dict[Int4, None] = {}
        with self._lock:
            for some_keys, some_ends in self._recent:
                keys.update(dict.fromkeys(some_keys))
                ends.update(dict.fromkeys(some_ends))
        return keys, ends


class _Write(_Read):
    """The write transaction: commits when its ``with`` block ends normally.

    Nothing reaches the server until the transaction needs an answer from it (module
    docstring, "Round trips"). Writes are buffered in memory, and reads see the buffer first;
    at commit every buffered write goes as one multi-row INSERT and one DELETE, pipelined with
    the COMMIT: one round trip. The first read sends BEGIN, the write limits and the lock, with
    the read and a prefetch of what the previous write transactions read (:class:`_Hot`) and
    of the keys named by :meth:`prefetch`, in one round trip; a key read once is answered from
    memory for the rest of the transaction.
    A range read (scan, count, ``last`` of a prefix) first sends the buffered writes of its
    namespace, queued before it; so does a buffer grown past :data:`_FLUSH_ROWS` rows. Every
    statement sent before the COMMIT is followed by a Sync, so the server's idle-in-transaction
    timer runs whenever this node stops sending.
    """

    def __init__(self, storage: PostgresStorage, conn: psycopg.Connection[Any]) -> None:
        super().__init__(storage, conn)
        self._attach(conn)
        self._txid: str | None = None
        self._begun = False
        self._pending: dict[Int4, dict[bytes, bytes | None]] = {}
        self._npending = 0
        self._known: dict[_Slot, bytes | None] = {}
        self._ends: dict[Int4, tuple[bytes, bytes] | None] = {}
        self._cleared: set[Int4] = set()
        self._used: dict[_Slot, None] = {}
        self._used_ends: dict[Int4, None] = {}
        #: Keys named by :meth:`prefetch`, to be read with the first read.
        self._wanted: dict[_Slot, None] = {}
        self._wanted_ends: dict[Int4, None] = {}
        self._locked_at = 0.0
        self._locked_cpu = 0.0
        self._locked_trips = 0
        self._rows_written = 0

    def _attach(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._cur = conn.cursor(binary=True)
        self._sink = conn.cursor(binary=True)
        self._mode = ExitStack()
        self._pipeline = self._mode.enter_context(conn.pipeline())

    def _replace(self) -> bool:
        """Swap a broken connection for another from the pool (nothing was written on it)."""
        old = self._conn
        assert old is not None
        with contextlib.suppress(psycopg.Error):
            self._mode.close()
        self._storage._release(old)
        self._attach(self._storage._connect())
        self._begun = False
        log.info("PostgreSQL connection found broken; replaced")
        return True

    # -- the server side ----------------------------------------------------------------------

    def _start(self, key: _Slot | None = None, end: Int4 | None = None) -> None:
        """Begin on the server in one round trip: BEGIN, the limits, the lock with the
        transaction id, and the prefetch of ``key``, ``end`` and the hot keys and ends.
        A pooled connection found broken is replaced: nothing had been sent on it but this."""
        storage = self._storage
        keys, ends = storage._hot.wanted()
        keys.update(self._wanted)
        ends.update(self._wanted_ends)
        if key is not None:
            keys[key] = None
        if end is not None:
            ends[end] = None
        for attempt in range(storage._pool_size + 1):
            conn = self._conn
            if conn is None:
                raise StorageError("the transaction has ended")
            try:
                self._begun = True
                conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED", prepare=False)
                for name, value in storage._write_limits:
                    conn.execute(self._sql.limits, (name, value), prepare=True)
                lock = conn.cursor(binary=True)
                lock.execute(self._sql.lock, (storage._write_lock,), prepare=True)
                got = ended = None
                if keys:
                    got = conn.cursor(binary=True)
                    got.execute(
                        self._sql.get_many,
                        ([ns for ns, _ in keys], [k for _, k in keys]),
                        prepare=True,
                    )
                if ends:
                    ended = conn.cursor(binary=True)
                    ended.execute(self._sql.ends, (list(ends),), prepare=True)
                self._pipeline.sync()
                row = lock.fetchone()
                found = got.fetchall() if got is not None else []
                tops = ended.fetchall() if ended is not None else []
            except psycopg.Error as err:
                if conn.broken and attempt < storage._pool_size and self._replace():
                    continue
                raise self._fail(err) from None
            break
        self._locked_at = time.perf_counter()
        self._locked_cpu = time.thread_time()
        self._statements += 2 + len(storage._write_limits) + bool(keys) + bool(ends)
        self._trips += 1
        self._locked_trips += 1
        self._txid = str(row[1]) if row and row[1] else "0"
        for slot in keys:
            self._known[slot] = None
        for ns, k, v in found:
            self._known[Int4(ns), bytes(k)] = bytes(v)
        for ns, k, v in tops:
            # A namespace written before this first read has an end the server cannot know.
            if Int4(ns) not in self._pending:
                self._ends[Int4(ns)] = None if k is None else (bytes(k), bytes(v))

    def _started(self) -> None:
        if self._txid is None:
            self._start()

    def _answered(self) -> None:
        """Sync after a statement whose rows are wanted, and wait for every answer up to it.
        (psycopg's own fetch would send a Flush instead; a Flush after the last Sync leaves
        the server waiting with no idle timer running, see :meth:`_sent`.)"""
        self._pipeline.sync()
        self._locked_trips += 1

    def _sent(self) -> None:
        """Follow the write just queued with a Sync and send both, without waiting for an
        answer. After a Sync the server is ready for a query when its input runs out, and
        only then does ``idle_in_transaction_session_timeout`` run: without it a node stopped
        mid-transaction would hold the write lock for ever. psycopg has no public call that
        syncs without waiting (``Pipeline.sync`` waits for every result), hence its two
        internal steps, the ones ``Pipeline.sync`` begins with."""
        assert self._conn is not None
        self._pipeline._enqueue_sync()
        self._conn.wait(self._pipeline._communicate_gen())

    def _send(self, query: sql.Composed, params: Sequence[object], *, sync: bool = True) -> None:
        """Queue ``query``; its result is never looked at."""
        if self._conn is None:
            raise StorageError("the transaction has ended")
        try:
            self._sink.execute(query, params, prepare=True)
            self._statements += 1
            if sync:
                self._sent()
        except psycopg.Error as err:
            raise self._fail(err) from None

    def _flush(self, only: Int4 | None = None, *, sync: bool = True) -> None:
        """Send the buffered writes (of namespace ``only``, or all) to the server."""
        names = list(self._pending) if only is None else [only] if only in self._pending else []
        if not names:
            return
        self._started()
        puts: tuple[list[Int4], list[bytes], list[bytes]] = ([], [], [])
        drops: tuple[list[Int4], list[bytes]] = ([], [])
        for ns in names:
            pending = self._pending.pop(ns)
            self._npending -= len(pending)
            self._cleared.discard(ns)
            for key, value in pending.items():
                slot = (ns, key)
                if slot in self._known:
                    self._known[slot] = value
                if value is None:
                    drops[0].append(ns)
                    drops[1].append(key)
                else:
                    puts[0].append(ns)
                    puts[1].append(key)
                    puts[2].append(value)
        self._rows_written += len(puts[0]) + len(drops[0])
        for i in range(0, len(puts[0]), _BATCH):
            part = slice(i, i + _BATCH)
            self._send(self._sql.put_rows, tuple(c[part] for c in puts), sync=sync)
        for i in range(0, len(drops[0]), _BATCH):
            part = slice(i, i + _BATCH)
            self._send(self._sql.delete_rows, tuple(c[part] for c in drops), sync=sync)

    def _send_commit(self, conn: psycopg.Connection[Any]) -> str:
        """Send every buffered write and COMMIT in one round trip and leave pipeline mode;
        the server's answer (``COMMIT``, or ``ROLLBACK`` for a transaction that had failed)."""
        self._conn = conn  # the transaction has ended for its caller, not yet for the server
        try:
            self._flush(sync=False)
        finally:
            self._conn = None
        done = conn.execute("COMMIT", prepare=False)
        self._statements += 1
        self._mode.close()
        return done.statusmessage or ""

    def _end(self, commit: bool) -> None:
        if self._conn is None:
            return
        if commit and not self._failed and self._txid is None and self._npending:
            try:
                self._start()  # a transaction that read nothing: lock, then commit
            except StorageError:
                self._end(False)
                raise
        conn = self._conn
        assert conn is not None
        self._conn = None
        storage = self._storage
        failed = self._failed
        try:
            if not self._begun:  # nothing reached the server
                with contextlib.suppress(psycopg.Error):
                    self._mode.close()
                storage._release(conn)
                return
            if commit and not failed:
                self._trips += 1
                try:
                    # COMMIT goes with every buffered write: one round trip. A server that
                    # answers ROLLBACK found the transaction failed (a queued write's error is
                    # raised here instead).
                    failed = self._send_commit(conn) != "COMMIT"
                except psycopg.Error as err:
                    with contextlib.suppress(psycopg.Error):
                        self._mode.close()
                    storage._finish(conn, commit=True, xid=self._txid or "0", error=err)
                    return
                if not failed:
                    storage._release(conn)
                    return
            with contextlib.suppress(psycopg.Error):
                self._mode.close()  # sync: collect what is queued (its errors no longer matter)
            storage._finish(conn, commit=False, xid=self._txid or "0")
            if commit:
                raise StorageError(
                    f"PostgreSQL at {storage.location}: a statement of the transaction failed; "
                    "nothing of it was written"
                )
        finally:
            self._settle()

    def _settle(self) -> None:
        """Count this transaction in the storage's figures and remember what it read."""
        storage = self._storage
        held = time.perf_counter() - self._locked_at if self._txid is not None else 0.0
        # The committing thread's own CPU time in that hold (the rest is waiting: for the
        # server, or for a core and the interpreter lock on a busy node).
        worked = time.thread_time() - self._locked_cpu if self._txid is not None else 0.0
        storage._figures.add(
            statements=self._statements,
            round_trips=self._trips,
            write_transactions=1,
            write_statements=self._statements,
            locked_round_trips=self._locked_trips,
            lock_seconds=held,
            lock_cpu_seconds=worked,
            rows_written=self._rows_written,
        )
        if self._txid is not None:
            storage._hot.learn(self._used, self._used_ends)

    def __enter__(self) -> _Write:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._end(kind is None)

    def commit(self) -> None:
        self._end(True)

    def abort(self) -> None:
        self._end(False)

    # -- reads: the buffer, then what was read, then the server -------------------------------

    def get(self, key: bytes, *, db: Namespace) -> bytes | None:
        if not _findable(key) or db.handle is None:
            return None
        ns = cast(Int4, db.handle)
        pending = self._pending.get(ns)
        if pending is not None and key in pending:
            return pending[key]
        if ns in self._cleared:
            return None
        slot = (ns, key)
        if self._txid is None:
            self._start(key=slot)
        if len(self._used) < _HOT_KEYS and slot not in self._wanted:
            # A key named in advance is named again by the next transaction that reads it:
            # teaching it would only fetch a key nobody reads again.
            self._used[slot] = None
        if slot in self._known:
            return self._known[slot]
        value = super().get(key, db=db)
        if len(self._known) >= _KNOWN_MAX:
            # Memory stays bounded in a large transaction: what was read is a cache (the
            # buffer and the server hold every write), so forgetting it loses nothing.
            self._known.clear()
        self._known[slot] = value
        return value

    def prefetch(
        self, keys: Iterable[tuple[Namespace, bytes]], ends: Iterable[Namespace] = ()
    ) -> None:
        """Read ``keys`` (namespace, key) and the ends of the namespaces ``ends`` with this
        transaction's first read: sent with the lock, in its round trip, so a later
        :meth:`get` of one (or a ``put`` with ``overwrite=False``, or a ``delete``, which look
        first) or :meth:`last` is answered from memory. The values are read after the lock is
        granted, so they are those any read of the transaction would see. Once the
        transaction has begun on the server this does nothing: each key is read when it is
        asked for."""
        if self._txid is not None:
            return
        for db, key in keys:
            if db.handle is not None and _findable(key):
                self._wanted[cast(Int4, db.handle), key] = None
        for db in ends:
            if db.handle is not None:
                self._wanted_ends[cast(Int4, db.handle)] = None

    def last(self, db: Namespace, *, prefix: bytes | None = None) -> tuple[bytes, bytes] | None:
        if db.handle is None:
            return None
        ns = cast(Int4, db.handle)
        if prefix is not None:
            self._flush(ns)
            self._started()
            return super().last(db, prefix=prefix)
        if ns not in self._ends:
            self._flush(ns)
        if self._txid is None:
            self._start(end=ns)
        self._used_ends[ns] = None
        if ns not in self._ends:
            self._ends[ns] = super().last(db)
        return self._ends[ns]

    def scan(
        self,
        db: Namespace,
        start: bytes = b"",
        stop: bytes | None = None,
        *,
        prefix: bytes | None = None,
        reverse: bool = False,
    ) -> Iterator[tuple[bytes, bytes]]:
        if db.handle is not None:
            self._started()
        return super().scan(db, start, stop, prefix=prefix, reverse=reverse)

    def _rows(self, query: sql.Composed, params: Sequence[object]) -> list[tuple[Any, ...]]:
        # Every statement names its namespace first: a range read sends what is buffered for
        # it before itself (a get is only sent for a key that is not buffered).
        if query is not self._sql.get:
            self._flush(cast(Int4, params[0]))
        return super()._rows(query, params)

    def count(self, db: Namespace) -> int:
        if db.handle is not None:
            self._started()
        return super().count(db)

    # -- writes: into the buffer --------------------------------------------------------------

    @staticmethod
    def _handle(db: Namespace) -> Int4:
        if db.handle is None:
            raise StorageError("the storage is open read-only")
        return cast(Int4, db.handle)

    def _buffer(self, ns: Int4, key: bytes, value: bytes | None) -> None:
        pending = self._pending.setdefault(ns, {})
        if key not in pending:
            self._npending += 1
        pending[key] = value
        if ns in self._ends:
            end = self._ends[ns]
            if value is None:
                if end is not None and end[0] == key:
                    del self._ends[ns]  # the new end is unknown here
            elif end is None or key >= end[0]:
                self._ends[ns] = (key, value)
        if self._npending >= _FLUSH_ROWS:
            self._flush()

    def put(self, key: bytes, value: bytes, *, db: Namespace, overwrite: bool = True) -> bool:
        _check_key(key)
        ns = self._handle(db)
        if not overwrite and self.get(key, db=db) is not None:
            return False
        self._buffer(ns, key, bytes(value))
        return True

    def put_many(
        self, items: Iterable[tuple[bytes, bytes]], *, db: Namespace, append: bool = False
    ) -> None:
        ns = self._handle(db)
        pairs = list(items)
        for key, _ in pairs:
            _check_key(key)
        if append:
            top = self.last(db)
            floor = None if top is None else top[0]
            for key, _ in pairs:
                if floor is not None and key <= floor:
                    raise StorageError("append: keys must ascend above every key present")
                floor = key
        for key, value in pairs:
            self._buffer(ns, key, bytes(value))

    def delete(self, key: bytes, *, db: Namespace) -> bool:
        ns = self._handle(db)
        if not _findable(key):
            return False
        if self.get(key, db=db) is None:
            return False
        self._buffer(ns, key, None)
        return True

    def clear(self, db: Namespace) -> None:
        ns = self._handle(db)
        self._started()
        self._npending -= len(self._pending.pop(ns, {}))
        self._send(self._sql.clear, (ns,))
        for slot in [slot for slot in self._known if slot[0] == ns]:
            del self._known[slot]
        self._ends[ns] = None
        self._cleared.add(ns)


class PostgresStorage:
    """A PostgreSQL database (one schema of it) as a :class:`saihm.storage.Storage`.

    ``url`` is a libpq URL (``postgresql://user:password@host:port/dbname?...``); the schema
    is the first of its ``search_path`` that exists. ``readonly`` creates nothing and refuses
    :meth:`write` (namespaces never written read as empty). ``pool_size`` bounds the
    connections, and so the transactions open at once in this process. Raises
    :class:`StorageError` if the database cannot be reached or holds another schema version.
    """

    kind = "postgresql"

    def __init__(
        self,
        url: str,
        namespaces: Sequence[bytes],
        *,
        readonly: bool = False,
        pool_size: int = 16,
    ) -> None:
        self.location, self._secrets = safe_location(url)
        self.namespaces: Sequence[bytes] = tuple(namespaces)
        self.readonly = readonly
        self._closed = False
        try:
            given = conninfo_to_dict(url)
        except Exception:
            # psycopg's message about a malformed URL may quote it, password and all.
            raise StorageError(f"not a usable PostgreSQL URL: {self.location}") from None
        self._kwargs: dict[str, Any] = {"autocommit": True}
        for name, default in (("application_name", "saihm"), ("connect_timeout", "10")):
            if name not in given:
                self._kwargs[name] = default
        self._url = url
        # libpq reads PGOPTIONS when the URL has no ``options``; a limit set there is the node's.
        options = given["options"] if "options" in given else os.environ.get("PGOPTIONS")
        given_settings = options_settings(str(options or ""))
        self._write_limits = [
            (name, value) for name, value in WRITE_TIMEOUTS if name not in given_settings
        ]
        self._hot = _Hot()
        self._figures = _Figures()
        self._pool_size = max(1, pool_size)
        # The first connection is made directly: an unreachable server or a refused password
        # is reported at once, with libpq's reason, rather than as a pool timeout.
        self._handles = self._setup()
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = (
            psycopg_pool.ConnectionPool(
                url,
                min_size=1,
                max_size=self._pool_size,
                kwargs=self._kwargs,
                configure=self._configure,
                open=False,
                timeout=_POOL_TIMEOUT,
                name="saihm",
            )
        )
        self._pool.open(wait=False)

    def __repr__(self) -> str:
        return f"PostgresStorage({self.location!r})"

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute(_SESSION_SETUP)

    def _error(self, err: BaseException) -> StorageError:
        """The interface's error for a psycopg one: the class, SQLSTATE and, for a connection
        failure, libpq's first line; never the password."""
        state = getattr(err, "sqlstate", None)
        if state == _DISK_FULL:
            return StorageFull(f"PostgreSQL at {self.location}: the disk is full (SQLSTATE 53100)")
        if state == _LOCK_NOT_AVAILABLE:
            return StorageError(
                f"PostgreSQL at {self.location}: the write lock was not granted within "
                "lock_timeout (another node's write transaction holds it; SQLSTATE 55P03)"
            )
        if state == _IN_FAILED_TRANSACTION:
            # A statement sent after one whose error the caller swallowed: the server had
            # already failed the transaction, so nothing of it will be written.
            return StorageError(
                f"PostgreSQL at {self.location}: a statement of the transaction failed; "
                "nothing of it was written (SQLSTATE 25P02)"
            )
        if isinstance(err, psycopg_pool.PoolTimeout):
            return StorageError(
                f"PostgreSQL at {self.location}: no connection within {_POOL_TIMEOUT:g} s"
            )
        if state is None and isinstance(err, psycopg.OperationalError):
            detail = (str(err).strip().splitlines() or ["connection failed"])[0]
        else:
            detail = f"{type(err).__name__} (SQLSTATE {state})" if state else type(err).__name__
        for secret in self._secrets:
            detail = detail.replace(secret, "***")
        return StorageError(f"PostgreSQL at {self.location}: {detail}")

    def _connect(self) -> psycopg.Connection[Any]:
        """A connection from the pool, in no transaction."""
        if self._closed:
            raise StorageError("the storage is closed")
        try:
            return self._pool.getconn()
        except (psycopg.Error, psycopg_pool.PoolTimeout) as err:
            raise self._error(err) from None

    def _release(self, conn: psycopg.Connection[Any]) -> None:
        try:
            self._pool.putconn(conn)
        except Exception as err:  # the pool was closed under us: the connection goes too
            log.debug("PostgreSQL connection not returned: %s", type(err).__name__)
            conn.close()

    def _begin(
        self, statement: str, params: Sequence[object] | None = None
    ) -> tuple[psycopg.Connection[Any], str]:
        """A connection inside a new transaction begun by ``statement`` (or, for a statement
        that begins none, after it), and the last value of its last result row. A pooled
        connection found broken (the server restarted, or ended the session) is replaced:
        nothing had been done on it. Every pooled connection may be broken, so up to one more
        attempt than the pool holds."""
        for attempt in range(self._pool_size + 1):
            conn = self._connect()
            try:
                cur = conn.execute(statement, params, prepare=False)
                while cur.nextset():
                    pass
                row = cur.fetchone()
                return conn, "" if row is None else str(row[-1])
            except psycopg.Error as err:
                broken = conn.broken
                try:
                    if not broken:
                        conn.rollback()
                finally:
                    self._release(conn)
                if not broken or attempt == self._pool_size:
                    raise self._error(err) from None
                log.info("PostgreSQL connection found broken; replaced")
        raise AssertionError("unreachable")

    def _finish(
        self,
        conn: psycopg.Connection[Any],
        *,
        commit: bool,
        xid: str | None,
        error: psycopg.Error | None = None,
    ) -> None:
        """End the transaction on ``conn`` (out of pipeline mode) and return it to the pool.

        A read snapshot (``xid`` None) ends with COMMIT: it wrote nothing, and a ROLLBACK
        would make psycopg drop the connection's prepared statements. A write transaction
        ends with ROLLBACK, unless ``commit``: then its COMMIT has failed with ``error``. If
        the connection broke, the COMMIT may still have reached the server, and the server
        is asked what became of ``xid``; otherwise a statement failed and nothing was
        written. Raises the interface's error for ``error`` unless the server committed.
        """
        try:
            if xid is None:
                conn.commit()
            elif not conn.broken:
                conn.rollback()
        except psycopg.Error as err:
            log.debug("PostgreSQL transaction not ended cleanly: %s", type(err).__name__)
        finally:
            self._release(conn)
        if commit and error is not None:
            if conn.broken and xid and self._committed(xid):
                return
            raise self._error(error) from None

    def _committed(self, xid: str) -> bool:
        """Whether transaction ``xid`` committed (False when that cannot be learned)."""
        try:
            with psycopg.connect(self._url, **self._kwargs) as conn:
                row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
        except psycopg.Error:
            return False
        return row is not None and row[0] == "committed"

    def _setup(self) -> dict[bytes, Namespace]:
        """Find the schema, create the tables (unless read-only) and number the namespaces."""
        try:
            with psycopg.connect(self._url, **self._kwargs) as conn:
                self._configure(conn)
                self.schema = current_schema(conn, self.location)
                self._sql = Statements(self.schema)
                self._write_lock = lock_key("write", self.schema)
                ids = namespace_ids(
                    conn, self._sql, self.namespaces, readonly=self.readonly, where=self.location
                )
        except psycopg.Error as err:
            raise self._error(err) from None
        return {
            name: Namespace(name, None if name not in ids else Int4(ids[name]))
            for name in self.namespaces
        }

    def namespace(self, name: bytes) -> Namespace:
        return self._handles[name]

    def read(self) -> _Read:
        conn, _ = self._begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1")
        return _Read(self, conn)

    def write(self) -> _Write:
        if self.readonly:
            raise StorageError("the storage is open read-only")
        return _Write(self, self._connect())

    def figures(self) -> dict[str, float]:
        """What this storage's transactions have cost since it was opened, as running
        totals: ``statements`` and ``round_trips`` (every transaction), ``write_transactions``,
        ``write_statements``, ``locked_round_trips`` (round trips made while the write lock
        was held: the answer of the one that took it and the request of the COMMIT count as
        one together), ``lock_seconds`` (the lock held, as this node sees it: from the answer
        of the statement that took it to the answer of the COMMIT), ``lock_cpu_seconds`` (the
        committing thread's CPU time in that hold) and ``rows_written``. Cheap counters, for
        ``saihm bench store``."""
        return self._figures.snapshot()

    def grow(self) -> bool:
        """Always False: PostgreSQL takes room as it needs it until its disk is full, and
        only the database's operator can add more."""
        return False

    def usage(self) -> Usage:
        s = self._sql
        conn, used = self._begin(
            "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0)"
            " FROM unnest(%s::text[]) AS t",
            ([name.as_string() for name in (s.kv, s.namespace, s.meta)],),
        )
        self._release(conn)  # autocommit: the query began no transaction
        return Usage(used=int(used or 0), capacity=None, limit=None)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.close()
