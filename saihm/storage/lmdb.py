"""The LMDB driver of the storage interface: the embedded default, and the only ``lmdb.open``
of the operator's data.

LMDB maps the whole file; a write that needs more than the map fails (``StorageFull``) and
:meth:`LmdbStorage.grow` doubles the map up to its ceiling. ``mdb_env_set_mapsize`` may only
be called while no transaction of this process is open (the library does not check: a read
transaction open across it would read through an unmapped address), so every transaction is
begun through a shared, per-thread reentrant gate held for the transaction's life, and a
resize takes the gate exclusively. Another process sharing the file may grow it beyond this
process's map: LMDB then answers a new transaction with ``MDB_MAP_RESIZED`` and the driver
adopts the size recorded in the file (docs/operations.md "Storage limits").

LMDB itself gives the interface's guarantees: one write transaction at a time across
processes (its writer lock), and MVCC read snapshots.

Point reads, puts and deletes go through one cursor per namespace per transaction, not the
transaction's own ``get``, ``put`` and ``delete``: the binding releases the interpreter lock
around each of those (and around each item of ``putmulti``), but not around a cursor's. An
operation on an in-memory B-tree takes microseconds; giving the lock up for it lets any other
thread that is running Python take it, and the transaction's thread then waits for that thread
to let go (up to ``sys.getswitchinterval()``, 5 ms by default), at every operation: a write
transaction of one remember makes about twenty of them. The commit, whose ``fsync`` is the one
slow call, still releases the lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import lmdb

from saihm.storage.base import (
    MAX_KEY,
    Namespace,
    StorageError,
    StorageFull,
    Usage,
    scan_bounds,
)

__all__ = ["LmdbStorage"]

log = logging.getLogger("saihm.storage")

_EXCLUSIVE_WAIT = 10.0  # seconds a resize waits for this process's open transactions to end
#: From this many pairs, ``put_many`` hands them to ``putmulti`` at once (a rebuild's chunks):
#: cheaper per pair than cursor puts when nothing else runs, though it releases the interpreter
#: lock for each pair.
_PUTMULTI_FROM = 256


def _error(err: lmdb.Error) -> StorageError:
    """The interface's error for an LMDB one (the message names the LMDB condition only)."""
    if isinstance(err, lmdb.MapFullError):
        return StorageFull("the LMDB map is full")
    if isinstance(err, lmdb.BadValsizeError):
        return StorageError(f"a key must be 1 to {MAX_KEY} bytes")
    return StorageError(f"LMDB: {type(err).__name__}")


class _Gate:
    """Shared holders (open transactions) versus one exclusive holder (a map resize)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._holders = 0
        self._resizing = False
        self._local = threading.local()

    def depth(self) -> int:
        return int(getattr(self._local, "depth", 0))

    def enter(self) -> None:
        local = self._local
        depth = getattr(local, "depth", 0)
        if not depth:
            with self._lock:
                while self._resizing:
                    self._cv.wait()
                self._holders += 1
        local.depth = depth + 1

    def leave(self) -> None:
        local = self._local
        depth = local.depth - 1
        local.depth = depth
        if not depth:
            with self._lock:
                self._holders -= 1
                if self._resizing and not self._holders:
                    self._cv.notify_all()

    @contextmanager
    def exclusive(self, wait: float) -> Iterator[None]:
        """Hold the gate alone. Raises ``StorageError`` if this thread has a transaction open
        or others stay open for ``wait`` seconds."""
        if self.depth():
            raise StorageError("cannot resize the map inside an open transaction")
        deadline = time.monotonic() + wait
        with self._cv:
            while self._resizing:
                self._cv.wait()
            self._resizing = True
            try:
                while self._holders:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise StorageError("transactions stayed open; map not resized")
                    self._cv.wait(remaining)
                yield
            finally:
                self._resizing = False
                self._cv.notify_all()


class _Read:
    """A read snapshot (also the base of the write transaction)."""

    __slots__ = ("_cursors", "_gate", "_open", "_txn")

    def __init__(self, gate: _Gate, txn: lmdb.Transaction) -> None:
        self._gate = gate
        self._txn = txn
        self._open = True
        #: One cursor per namespace handle for point operations (the module's docstring).
        self._cursors: dict[Any, lmdb.Cursor] = {}

    def _cursor(self, handle: Any) -> lmdb.Cursor:
        cursor = self._cursors.get(handle)
        if cursor is None:
            cursor = self._cursors[handle] = self._txn.cursor(db=handle)
        return cursor

    def _end(self, commit: bool) -> None:
        if not self._open:
            return
        self._open = False
        cursors, self._cursors = self._cursors, {}
        for cursor in cursors.values():
            cursor.close()
        try:
            if commit:
                self._txn.commit()
            else:
                self._txn.abort()
        except lmdb.Error as err:
            raise _error(err) from None
        finally:
            self._gate.leave()

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
        handle: Any = db.handle
        if handle is None:
            return None
        try:
            value = cast("bytes | None", self._cursor(handle).get(key))
        except lmdb.Error as err:
            raise _error(err) from None
        return value

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
        return self._scan(db.handle, *bounds, reverse)

    def _scan(
        self, handle: Any, start: bytes, stop: bytes | None, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        # The environment is opened without buffers=True: keys and values are bytes.
        try:
            with self._txn.cursor(db=handle) as cur:
                if not reverse:
                    if not (cur.set_range(start) if start else cur.first()):
                        return
                    pairs = cast(Iterator[tuple[bytes, bytes]], cur.iternext())
                    for key, value in pairs:
                        if stop is not None and key >= stop:
                            return
                        yield key, value
                    return
                found = cur.last() if stop is None or not cur.set_range(stop) else cur.prev()
                if not found:
                    return
                for key, value in cast(Iterator[tuple[bytes, bytes]], cur.iterprev()):
                    if key < start:
                        return
                    yield key, value
        except lmdb.Error as err:
            raise _error(err) from None

    def last(self, db: Namespace, *, prefix: bytes | None = None) -> tuple[bytes, bytes] | None:
        handle: Any = db.handle
        if handle is None:
            return None
        if prefix is None:
            # The tree size is read this way by every proof and append: one cursor step.
            try:
                cur = self._cursor(handle)
                return cast("tuple[bytes, bytes]", cur.item()) if cur.last() else None
            except lmdb.Error as err:
                raise _error(err) from None
        pairs = self.scan(db, prefix=prefix, reverse=True)
        try:
            return next(iter(pairs), None)
        finally:
            close = getattr(pairs, "close", None)
            if close is not None:
                close()  # the generator's cursor, now rather than when it is collected

    def count(self, db: Namespace) -> int:
        handle: Any = db.handle
        if handle is None:
            return 0
        try:
            return int(self._txn.stat(handle)["entries"])
        except lmdb.Error as err:
            raise _error(err) from None


class _Write(_Read):
    """The write transaction: commits when its ``with`` block ends normally."""

    __slots__ = ()

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

    def _handle(self, db: Namespace) -> Any:
        if db.handle is None:
            raise StorageError("the storage is open read-only")
        return db.handle

    def put(self, key: bytes, value: bytes, *, db: Namespace, overwrite: bool = True) -> bool:
        # The hottest call of a commit or a rebuild (several per leaf): the handle check is
        # inlined rather than a call of _handle.
        handle: Any = db.handle
        if handle is None:
            raise StorageError("the storage is open read-only")
        try:
            return self._cursor(handle).put(key, value, overwrite=overwrite) is True
        except lmdb.Error as err:
            raise _error(err) from None

    def put_many(
        self, items: Iterable[tuple[bytes, bytes]], *, db: Namespace, append: bool = False
    ) -> None:
        pairs = items if isinstance(items, list) else list(items)
        try:
            if len(pairs) < _PUTMULTI_FROM:
                # The live write path's few leaves, nodes and tiles: a cursor's puts keep the
                # interpreter lock, which ``putmulti`` gives up for each item.
                put = self._cursor(self._handle(db)).put
                added = sum(put(key, value, append=append) is True for key, value in pairs)
            else:
                with self._txn.cursor(db=self._handle(db)) as cur:
                    _, added = cur.putmulti(pairs, append=append)
        except lmdb.Error as err:
            raise _error(err) from None
        if append and added != len(pairs):
            raise StorageError("append: keys must ascend above every key present")

    def delete(self, key: bytes, *, db: Namespace) -> bool:
        try:
            cursor = self._cursor(self._handle(db))
            return bool(cursor.set_key(key) and cursor.delete())
        except lmdb.Error as err:
            raise _error(err) from None

    def clear(self, db: Namespace) -> None:
        handle = self._handle(db)
        cursor = self._cursors.pop(handle, None)
        if cursor is not None:
            cursor.close()
        try:
            self._txn.drop(handle, delete=False)
        except lmdb.Error as err:
            raise _error(err) from None


class LmdbStorage:
    """A data directory's LMDB environment as a :class:`saihm.storage.Storage`.

    ``map_size`` is the map to open with; :meth:`grow` doubles it up to ``map_size_max``
    (never below the map opened with). ``readonly`` opens without write access (a missing
    namespace then reads as empty); ``lock=False`` only for a copy no process writes;
    ``sync=False`` and ``writemap=True`` only for a scratch storage that is thrown away
    (commits are then not durable).
    """

    kind = "lmdb"

    def __init__(
        self,
        path: Path,
        namespaces: Sequence[bytes],
        *,
        map_size: int = 8 << 30,
        map_size_max: int | None = None,
        readonly: bool = False,
        lock: bool = True,
        sync: bool = True,
        writemap: bool = False,
        max_readers: int = 256,
    ) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        self.namespaces: Sequence[bytes] = tuple(namespaces)
        self.readonly = readonly
        if not readonly:
            self.path.mkdir(parents=True, exist_ok=True)
        try:
            self._env = lmdb.open(
                str(self.path),
                max_dbs=len(self.namespaces) + 4,
                map_size=map_size,
                max_readers=max_readers,
                readonly=readonly,
                lock=lock,
                sync=sync,
                metasync=sync,
                writemap=writemap,
                create=not readonly,
            )
        except lmdb.Error as err:
            raise _error(err) from None
        self.ceiling = max(map_size_max or map_size, self.map_size)
        self._gate = _Gate()
        self._handles: dict[bytes, Namespace] = {}
        for name in self.namespaces:
            try:
                handle = self._env.open_db(name, create=not readonly)
            except lmdb.NotFoundError:
                handle = None  # read-only and never written: reads as empty
            except lmdb.Error as err:
                self._env.close()
                raise _error(err) from None
            self._handles[name] = Namespace(name, handle)

    def __repr__(self) -> str:
        return f"LmdbStorage({self.location!r})"

    def namespace(self, name: bytes) -> Namespace:
        return self._handles[name]

    @property
    def env(self) -> lmdb.Environment:
        """The raw ``lmdb.Environment``, for tests and tools that inspect or tamper with raw
        records (in one process LMDB allows one handle per file). The store never uses it:
        transactions begun on it bypass the resize gate."""
        return self._env

    @property
    def map_size(self) -> int:
        """This process's current map size in bytes."""
        return int(self._env.info()["map_size"])

    def _begin(self, write: bool) -> lmdb.Transaction:
        for _ in range(3):
            self._gate.enter()
            try:
                return self._env.begin(write=write)
            except lmdb.MapResizedError:
                self._gate.leave()
                self._adopt()
            except lmdb.Error as err:
                self._gate.leave()
                raise _error(err) from None
            except BaseException:
                self._gate.leave()
                raise
        raise StorageError("the LMDB map keeps changing size")

    def read(self) -> _Read:
        return _Read(self._gate, self._begin(False))

    def write(self) -> _Write:
        if self.readonly:
            raise StorageError("the storage is open read-only")
        return _Write(self._gate, self._begin(True))

    def _adopt(self) -> None:
        """Take the map size another process recorded in the file (``set_mapsize(0)``)."""
        with self._gate.exclusive(_EXCLUSIVE_WAIT):
            before = self.map_size
            self._env.set_mapsize(0)
            log.info("LMDB map adopted: %d -> %d bytes", before, self.map_size)

    def grow(self) -> bool:
        """After :class:`StorageFull`: a larger map, up to the ceiling. False at the ceiling.

        First adopts a size another process has already recorded; if that is not larger,
        doubles the map (capped at the ceiling). Raises ``StorageError`` if this process's
        transactions stay open too long to resize.
        """
        with self._gate.exclusive(_EXCLUSIVE_WAIT):
            before = self.map_size
            self._env.set_mapsize(0)
            adopted = self.map_size
            if adopted > before:
                log.warning("LMDB map adopted from another process: %d bytes", adopted)
                return True
            target = min(before * 2, self.ceiling)
            if target <= before:
                if adopted != before:
                    self._env.set_mapsize(before)
                return False
            self._env.set_mapsize(target)
            log.warning("LMDB map grown to %d bytes (ceiling %d)", self.map_size, self.ceiling)
            return True

    def usage(self) -> Usage:
        info = self._env.info()
        used = (int(info["last_pgno"]) + 1) * int(self._env.stat()["psize"])
        return Usage(used=used, capacity=int(info["map_size"]), limit=self.ceiling)

    def copy_to(self, path: Path, *, compact: bool = True, snapshot: _Read | None = None) -> None:
        """A consistent copy of the environment into the empty directory ``path`` (backup).

        With ``snapshot`` (a read of this storage) the copy is of that snapshot, so what the
        caller read in it describes the copy exactly.
        """
        txn = None if snapshot is None else snapshot._txn
        try:
            self._env.copy(str(path), compact=compact, txn=txn)
        except lmdb.Error as err:
            raise _error(err) from None

    def close(self) -> None:
        self._env.close()
