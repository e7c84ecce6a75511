"""The store's LMDB environment with a map that grows, and the gate that makes growing safe.

LMDB maps the whole file; a write that needs more than the map fails with ``MapFullError``.
``mdb_env_set_mapsize`` may only be called while no transaction of this process is open (the
library does not check: a read transaction open across it would read through an unmapped
address), so every transaction of the store's environment is begun through
:meth:`Environment.begin`, which holds a shared, per-thread reentrant gate for the
transaction's life; :meth:`Environment.grow` takes the gate exclusively.

Another process sharing the environment may grow the file beyond this process's map. LMDB then
answers a new transaction with ``MDB_MAP_RESIZED`` (``lmdb.MapResizedError``); :meth:`begin`
adopts the size recorded in the file (``set_mapsize(0)``) under the exclusive gate and begins
again (docs/operations.md "Storage limits").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import lmdb

from saihm.errors import Unavailable

__all__ = ["Environment"]

log = logging.getLogger("saihm.store")

_EXCLUSIVE_WAIT = 10.0  # seconds a growth waits for open transactions of this process to end


class _Gate:
    """Shared holders (open transactions) versus one exclusive holder (a map resize)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._holders = 0
        self._resizing = False
        self._local = threading.local()

    def depth(self) -> int:
        return getattr(self._local, "depth", 0)

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
        """Hold the gate alone. Raises ``Unavailable`` if this thread has a transaction open
        or others stay open for ``wait`` seconds."""
        if self.depth():
            raise Unavailable("cannot resize the map inside an open transaction")
        deadline = time.monotonic() + wait
        with self._cv:
            while self._resizing:
                self._cv.wait()
            self._resizing = True
            try:
                while self._holders:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise Unavailable("transactions stayed open; map not resized")
                    self._cv.wait(remaining)
                yield
            finally:
                self._resizing = False
                self._cv.notify_all()


class _Txn:
    """A transaction begun through the gate; releases the gate when it ends.

    Used as a context manager it yields the ``lmdb.Transaction`` itself; used directly, it
    forwards to it and releases the gate on ``commit`` or ``abort``.
    """

    __slots__ = ("_gate", "_open", "txn")

    def __init__(self, gate: _Gate, txn: lmdb.Transaction) -> None:
        self._gate = gate
        self.txn = txn
        self._open = True

    def _release(self) -> None:
        if self._open:
            self._open = False
            self._gate.leave()

    def __enter__(self) -> lmdb.Transaction:
        return self.txn.__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            self.txn.__exit__(*exc)
        finally:
            self._release()

    def commit(self) -> None:
        try:
            self.txn.commit()
        finally:
            self._release()

    def abort(self) -> None:
        try:
            self.txn.abort()
        finally:
            self._release()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.txn, name)


class Environment:
    """The store's ``lmdb.Environment``: same methods, plus a map that grows to ``ceiling``.

    ``env`` is freshly opened by the store (the only module that opens the operator's
    environment) and not yet used; ``ceiling`` is the largest map :meth:`grow` may reach
    (never below the map it was opened with). Other attributes are the environment's.
    """

    def __init__(self, env: lmdb.Environment, *, ceiling: int) -> None:
        self._env = env
        self.ceiling = max(ceiling, self.map_size)
        self._gate = _Gate()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def __repr__(self) -> str:
        return f"Environment({self._env.path()!r})"

    @property
    def map_size(self) -> int:
        """This process's current map size in bytes."""
        return int(self._env.info()["map_size"])

    def begin(self, **options: Any) -> _Txn:
        """``lmdb.Environment.begin`` through the gate; adopts a map another process grew.

        Raises ``Unavailable`` if the map was grown elsewhere and cannot be adopted now.
        """
        for _ in range(3):
            self._gate.enter()
            try:
                return _Txn(self._gate, self._env.begin(**options))
            except lmdb.MapResizedError:
                self._gate.leave()
                self.adopt()
            except BaseException:
                self._gate.leave()
                raise
        raise Unavailable("the LMDB map keeps changing size")

    def adopt(self) -> None:
        """Take the map size another process recorded in the file (``set_mapsize(0)``)."""
        with self._gate.exclusive(_EXCLUSIVE_WAIT):
            before = self.map_size
            self._env.set_mapsize(0)
            log.info("LMDB map adopted: %d -> %d bytes", before, self.map_size)

    def grow(self) -> bool:
        """After a ``MapFullError``: a larger map, up to the ceiling. False if at the ceiling.

        First adopts a size another process has already recorded; if that is not larger,
        doubles the map (capped at the ceiling). Raises ``Unavailable`` if this process's
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
