"""The projection databases of one environment, and the only code here that touches storage.

Every projection module reads and writes through a :class:`Tables`: ``get``/``put`` (with the
record MAC for the :data:`SEALED` databases, saihm/projections/seal.py), ``delete`` and key-order
``scan``, over a transaction of the storage interface (saihm/storage/base.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar

from saihm.events.operations import Operation
from saihm.events.records import Body
from saihm.projections.keys import LeafView
from saihm.projections.seal import RecordSeal

#: A transaction of the storage (a read snapshot, or the write transaction for the writers).
Txn = Any
#: A projection's handler for one operation, unbound: (projection, write txn, leaf index,
#: leaf, the event's private body or None).
Handler = Callable[[Any, Txn, int, LeafView, Body | None], None]


class Tables:
    """Handles of the projection databases, and the seal of the MAC-bound ones."""

    __slots__ = ("db", "seal", "sealed")

    def __init__(
        self, handles: dict[bytes, Any], seal: RecordSeal, sealed: Iterable[bytes]
    ) -> None:
        #: Database name -> the environment's handle.
        self.db = handles
        self.seal = seal
        self.sealed = frozenset(sealed)

    def raw(self, txn: Txn, name: bytes, key: bytes) -> bytes | None:
        """The stored bytes under ``key``, MAC not checked (for a record that can only
        refuse, such as a session revocation, or for a presence test)."""
        raw = txn.get(key, db=self.db[name])
        return None if raw is None else bytes(raw)

    def get(self, txn: Txn, name: bytes, key: bytes) -> bytes | None:
        """The value under ``key``; for a sealed database None (and a warning) when its MAC is
        missing or wrong, so a forged or edited record grants nothing."""
        raw = txn.get(key, db=self.db[name])
        if name in self.sealed:
            return self.seal.open(name, key, raw)
        return None if raw is None else bytes(raw)

    def put(
        self, txn: Txn, name: bytes, key: bytes, value: bytes, *, overwrite: bool = True
    ) -> bool:
        """Store ``value`` (with its MAC in a sealed database); with ``overwrite=False`` an
        existing key is kept and False returned."""
        if name in self.sealed:
            value = self.seal.seal(name, key, value)
        return bool(txn.put(key, value, db=self.db[name], overwrite=overwrite))

    def put_sealed(self, txn: Txn, name: bytes, key: bytes, value: bytes) -> None:
        """Store ``value`` with its record MAC in a database not sealed as a whole (the one
        sealed record of ``p_meta``); read it back with ``seal.open`` over :meth:`raw`."""
        txn.put(key, self.seal.seal(name, key, value), db=self.db[name])

    def delete(self, txn: Txn, name: bytes, key: bytes) -> bool:
        """Remove ``key``; False if it was absent."""
        return bool(txn.delete(key, db=self.db[name]))

    def scan(self, txn: Txn, name: bytes, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Keys and values of ``name`` whose key starts with ``prefix``, in key order; records
        of a sealed database whose MAC fails are skipped (and logged)."""
        sealed = name in self.sealed
        for key, raw in txn.scan(self.db[name], prefix=prefix):
            value = self.seal.open(name, key, raw) if sealed else bytes(raw)
            if value is not None:
                yield key, value

    def items(self, txn: Txn, name: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every stored (key, value) of ``name`` in key order, as stored (MACs included)."""
        for key, value in txn.scan(self.db[name]):
            yield bytes(key), bytes(value)


class Projection:
    """One projection: its databases, the operations it applies, and its typed queries.

    A subclass names its databases (``DB_NAMES``, the MAC-bound ones also in ``SEALED``) and
    maps each operation it derives state from to a handler method (``HANDLERS``, the functions
    themselves, listed after them); the operation's spec names the projections that apply it
    (``OperationSpec.projections``, saihm/events/operations.py), and the registry
    (saihm/projections/apply.py) calls the handler, bound to the projection, for every leaf of
    that operation with the write transaction, the leaf index, the leaf and the event's private
    body (or None).
    """

    DB_NAMES: ClassVar[tuple[bytes, ...]] = ()
    SEALED: ClassVar[frozenset[bytes]] = frozenset()
    #: Operation -> its handler (an unbound method of the subclass).
    HANDLERS: ClassVar[Mapping[Operation, Handler]] = {}

    __slots__ = ("t",)

    def __init__(self, tables: Tables) -> None:
        self.t = tables
