"""The storage interface: ordered key/value namespaces, one writer at a time, many snapshots.

Everything the operator keeps goes through this interface: the log's leaves, nodes and tiles,
the keyring, the projections and the store's own databases. A driver implements it over one
engine: :mod:`saihm.storage.lmdb` (the embedded default) and :mod:`saihm.storage.postgres`.
The semantics are pinned by the contract tests in ``tests/storage/`` that every driver passes:

- A **namespace** is an ordered map from byte keys to byte values, named when the storage is
  opened (:meth:`Storage.namespace` hands out its handle). Keys order as unsigned bytes
  (``memcmp``), shorter first on a common prefix. Keys are 1 to 511 bytes; values any length
  the engine allows.
- :meth:`Storage.read` begins a **read snapshot**: every read in it sees the state of one
  committed moment, unchanged by writes committed after it began, in this process or another.
  Any number may be open at once, in any threads and processes.
- :meth:`Storage.write` begins the **write transaction**: at most one is open at a time across
  every process and node sharing the storage (a second waits). A driver may take its turn
  only at the transaction's first read, or at its commit if it reads nothing (PostgreSQL does:
  the lock travels with that read): what a transaction reads and writes is still as of one
  moment, after every write transaction that had its turn before. It sees its own writes; nothing
  of it is visible to anyone else until it commits, and all of it is visible after. Leaving its
  ``with`` block normally commits; leaving it by an exception aborts (nothing written) and the
  exception propagates.
- A write that does not fit raises :class:`StorageFull` and the transaction is aborted; after
  :meth:`Storage.grow` returns True the same writes may be tried again from the start.
- Every failure of the engine reaches callers as :class:`StorageError` (an ``Unavailable``:
  503 at the HTTP edge); no engine exception escapes a driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from saihm.errors import Unavailable

__all__ = [
    "MAX_KEY",
    "Namespace",
    "ReadTxn",
    "Storage",
    "StorageError",
    "StorageFull",
    "Usage",
    "WriteTxn",
    "prefetch",
    "prefix_end",
    "scan_bounds",
]

MAX_KEY = 511  # bytes; LMDB's default limit, kept by every driver so data moves between them


def prefix_end(prefix: bytes) -> bytes | None:
    """The least key greater than every key that starts with ``prefix`` (None: no such key)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def scan_bounds(
    start: bytes, stop: bytes | None, prefix: bytes | None
) -> tuple[bytes, bytes | None] | None:
    """The ``[start, stop)`` a :meth:`ReadTxn.scan` walks once ``prefix`` is folded in, or None
    when the range is empty (shared by every driver)."""
    if prefix is not None:
        start = max(start, prefix)
        end = prefix_end(prefix)
        if end is not None and (stop is None or end < stop):
            stop = end
    if stop is not None and start >= stop:
        return None
    return start, stop


class StorageError(Unavailable):
    """The storage engine failed or refused; nothing of the failed transaction was written."""


class StorageFull(StorageError):
    """A write needs more room than the storage has now (see :meth:`Storage.grow`)."""

    code = "operator_storage_full"


@dataclass(frozen=True, slots=True)
class Namespace:
    """The handle of one declared namespace; ``handle`` is the driver's own."""

    name: bytes
    handle: object = None

    def __repr__(self) -> str:
        return f"Namespace({self.name!r})"


@dataclass(frozen=True, slots=True)
class Usage:
    """Space in use and, where the driver has one, the limit it may grow to (bytes)."""

    used: int
    capacity: int | None
    limit: int | None


class ReadTxn(Protocol):
    """A read snapshot (or the write transaction, which is also one)."""

    def get(self, key: bytes, *, db: Namespace) -> bytes | None:
        """The value under ``key``, or None."""
        ...

    def scan(
        self,
        db: Namespace,
        start: bytes = b"",
        stop: bytes | None = None,
        *,
        prefix: bytes | None = None,
        reverse: bool = False,
    ) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs with ``start <= key < stop`` (``stop`` None: no upper bound)
        and, if given, ``key.startswith(prefix)``; ascending, or descending with ``reverse``.
        The iterator is valid only while the transaction is open."""
        ...

    def last(self, db: Namespace, *, prefix: bytes | None = None) -> tuple[bytes, bytes] | None:
        """The pair with the greatest key (starting with ``prefix`` if given), or None."""
        ...

    def count(self, db: Namespace) -> int:
        """The number of keys in ``db``."""
        ...

    def close(self) -> None:
        """End the transaction (a write transaction is aborted). Idempotent."""
        ...

    def __enter__(self) -> ReadTxn: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class WriteTxn(ReadTxn, Protocol):
    """The one write transaction."""

    def put(self, key: bytes, value: bytes, *, db: Namespace, overwrite: bool = True) -> bool:
        """Store ``value`` under ``key``. With ``overwrite=False`` an existing key is left as
        it is and False returned; otherwise True."""
        ...

    def put_many(
        self, items: Iterable[tuple[bytes, bytes]], *, db: Namespace, append: bool = False
    ) -> None:
        """Store every pair (overwriting). ``append=True`` promises that the keys ascend
        strictly and exceed every key already in ``db`` (a fast path for logs); a driver
        raises :class:`StorageError` when the promise is broken."""
        ...

    def delete(self, key: bytes, *, db: Namespace) -> bool:
        """Remove ``key``; False if it was absent."""
        ...

    def clear(self, db: Namespace) -> None:
        """Remove every key of ``db``."""
        ...

    def commit(self) -> None:
        """Make every write of the transaction durable and visible, then end it."""
        ...

    def abort(self) -> None:
        """Discard every write of the transaction and end it. Idempotent."""
        ...

    def __enter__(self) -> WriteTxn: ...


class Storage(Protocol):
    """One opened storage: a data directory's LMDB environment or a PostgreSQL database."""

    #: ``"lmdb"`` or ``"postgresql"``.
    kind: str
    #: Where it is, with no credential in it (safe to log).
    location: str
    #: The namespaces it was opened with.
    namespaces: Sequence[bytes]

    def namespace(self, name: bytes) -> Namespace:
        """The handle of a namespace given at open; ``KeyError`` for any other name."""
        ...

    def read(self) -> ReadTxn:
        """Begin a read snapshot (use it in a ``with`` block, or ``close`` it)."""
        ...

    def write(self) -> WriteTxn:
        """Begin the write transaction, waiting while another process or node holds it (by
        the transaction's first read at the latest: see the module docstring)."""
        ...

    def grow(self) -> bool:
        """After :class:`StorageFull`: make more room; False if there can be no more."""
        ...

    def usage(self) -> Usage:
        """Space in use now."""
        ...

    def close(self) -> None:
        """Release the engine; every transaction must have ended. Idempotent."""
        ...


def prefetch(
    txn: ReadTxn, keys: Iterable[tuple[Namespace, bytes]], ends: Iterable[Namespace] = ()
) -> None:
    """Name what ``txn`` is about to read: ``keys`` (namespace, key) for :meth:`ReadTxn.get`
    and the namespaces ``ends`` for :meth:`ReadTxn.last` without a prefix. A driver whose
    reads are round trips (PostgreSQL's) reads them all at once, so each later read of one is
    answered from memory with what it would have read; for the others (LMDB's, whose reads
    are memory reads) this does nothing, and ``keys`` is not even iterated. Reads stay
    correct whatever is named: naming is only a hint."""
    fetch = getattr(txn, "prefetch", None)
    if fetch is not None:
        fetch(keys, ends)
