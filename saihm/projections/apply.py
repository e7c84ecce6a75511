"""The registry of projections, the one apply function over all of them, and the comparison.

Each projection is a module with its databases, its handlers and its typed queries
(holders, cells, contracts, grants, governance, receipts, meta); :data:`REGISTRY` lists them
and :class:`Projections` composes them over one environment. The live store runs
:meth:`Projections.apply`; ``saihm rebuild`` runs the bulk apply over the same handlers and row
functions (saihm/projections/bulk.py), so a rebuild into fresh databases is byte-identical to
the live ones (tests/projections/test_rebuild_fixture.py pins
the bytes against a log written before the records were typed).

Every index key is a fixed-width concatenation of 32-byte ids and big-endian u64 leaf indexes,
so byte order is log order within one id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import MethodType

from saihm.events.operations import OPERATIONS
from saihm.events.records import Body
from saihm.projections.cells import BY_HOLDER, BY_SESSION, CELLS, ERASURES, RECORD_HEADS, Cells
from saihm.projections.contracts import BY_GRANTEE, BY_OWNER, CONTRACTS, Contracts
from saihm.projections.governance import PROPOSALS, TALLIES, VOTES, Governance
from saihm.projections.grants import GRANTS, REVOKED, Grants, revocation_subject
from saihm.projections.holders import HOLDERS, Holders
from saihm.projections.keys import LeafView
from saihm.projections.meta import (
    APPLIED,
    FORMAT,
    META,
    PROJECTION_FORMAT,
    REVOCATIONS,
    Meta,
    ProjectionState,
    StaleProjections,
)
from saihm.projections.receipts import (
    BY_OPERATION,
    BY_SUBJECT,
    OPERATION_KEYS,
    RECEIPT_IDS,
    RX_BY_HOLDER,
    Receipts,
)
from saihm.projections.seal import RecordSeal
from saihm.projections.tables import Projection, Tables, Txn
from saihm.storage.base import Namespace, Storage

__all__ = [
    "APPLIED",
    "BY_GRANTEE",
    "BY_HOLDER",
    "BY_OPERATION",
    "BY_OWNER",
    "BY_SESSION",
    "BY_SUBJECT",
    "CELLS",
    "CONTRACTS",
    "DB_NAMES",
    "ERASURES",
    "FORMAT",
    "GRANTS",
    "HOLDERS",
    "META",
    "PROJECTION_FORMAT",
    "PROPOSALS",
    "RECEIPT_IDS",
    "RECORD_HEADS",
    "REGISTRY",
    "REVOKED",
    "RX_BY_HOLDER",
    "SEALED",
    "TALLIES",
    "VOTES",
    "ProjectionState",
    "Projections",
    "StaleProjections",
    "first_difference",
    "revocation_subject",
]

#: Every projection, by the attribute name :class:`Projections` gives it.
REGISTRY: dict[str, type[Projection]] = {
    "receipts": Receipts,
    "holders": Holders,
    "cells": Cells,
    "contracts": Contracts,
    "grants": Grants,
    "governance": Governance,
    "meta": Meta,
}

# Named databases, in a fixed order (the owner of the environment sizes max_dbs from these;
# comparisons report the first difference in this order).
DB_NAMES: tuple[bytes, ...] = (
    CELLS,
    BY_HOLDER,
    BY_SESSION,
    RECORD_HEADS,
    CONTRACTS,
    BY_GRANTEE,
    BY_OWNER,
    ERASURES,
    HOLDERS,
    PROPOSALS,
    VOTES,
    TALLIES,
    GRANTS,
    RECEIPT_IDS,
    BY_SUBJECT,
    RX_BY_HOLDER,
    BY_OPERATION,
    REVOKED,
    META,
)
assert sorted(DB_NAMES) == sorted(n for p in REGISTRY.values() for n in p.DB_NAMES)

# The databases whose records grant access: each value is stored as value || MAC
# (saihm/projections/seal.py). Not sealed: the public receipt indexes, tallies, the erasure
# list, and the cell indexes by holder and by session, which are untrusted candidate hints
# (DESIGN.md "Data at rest"): the read path decides on the verified, decrypted label and the
# status counts check each hint against its sealed cell record.
SEALED: frozenset[bytes] = frozenset(n for p in REGISTRY.values() for n in p.SEALED)

_Handler = Callable[[Txn, int, LeafView, "Body | None"], None]


def _check_handlers() -> None:
    """Each operation's spec names exactly the projections that hold a handler for it."""
    for op, spec in OPERATIONS.items():
        holding = {name for name, kind in REGISTRY.items() if op in kind.HANDLERS}
        if set(spec.projections) != holding:
            raise AssertionError(f"{op}: the spec names {spec.projections}, handlers in {holding}")


_check_handlers()


class Projections:
    """The projection databases of one environment, and the code that derives them.

    Typed queries live on the parts: ``projections.cells``, ``.contracts``, ``.grants``,
    ``.holders``, ``.governance``, ``.receipts``, ``.meta``.
    """

    DB_NAMES = DB_NAMES
    SEALED = SEALED

    receipts: Receipts
    holders: Holders
    cells: Cells
    contracts: Contracts
    grants: Grants
    governance: Governance
    meta: Meta

    def __init__(self, storage: Storage, seal: RecordSeal) -> None:
        self.storage = storage
        self.seal = seal
        self.db: dict[bytes, Namespace] = {name: storage.namespace(name) for name in DB_NAMES}
        self.tables = Tables(self.db, seal, SEALED)
        parts = {attribute: kind(self.tables) for attribute, kind in REGISTRY.items()}
        for attribute, part in parts.items():
            setattr(self, attribute, part)
        # Keyed by the Operation member, looked up by the name a leaf carries (a StrEnum
        # member hashes and compares as its name).
        self._handlers: dict[str, tuple[_Handler, ...]] = {
            op: tuple(
                MethodType(REGISTRY[name].HANDLERS[op], parts[name]) for name in spec.projections
            )
            for op, spec in OPERATIONS.items()
            if spec.projections
        }

    # -- raw access (tests, fsck and the comparison read databases by name) ----------------

    def get(self, txn: Txn, name: bytes, key: bytes) -> bytes | None:
        """The value under ``key`` in ``name``; None for a sealed record whose MAC fails."""
        return self.tables.get(txn, name, key)

    def items(self, txn: Txn, name: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of one projection database, in key order, as stored."""
        return self.tables.items(txn, name)

    # -- applying -------------------------------------------------------------------------

    def state(self, txn: Txn) -> ProjectionState:
        """The applied index and the schema version, as stored (:class:`ProjectionState`)."""
        return self.meta.state(txn)

    def applied(self, txn: Txn) -> int:
        """How many leaves the projections reflect."""
        return self.meta.state(txn).applied

    def apply(
        self,
        txn: Txn,
        index: int,
        leaf: LeafView,
        body: Body | None,
        *,
        record_applied: bool = True,
    ) -> None:
        """Apply leaf ``index`` (and its private body, if the event has one) to every projection.

        Preconditions: ``index == self.applied(txn)``; the caller holds a write transaction.
        ``record_applied=False`` lets a caller applying a run of leaves in one transaction write
        the applied count once, with :meth:`mark_applied`, after the last of them.
        """
        self.receipts.apply_every(txn, index, leaf)
        for handler in self._handlers.get(leaf.operation, ()):
            handler(txn, index, leaf, body)
        if record_applied:
            self.meta.mark_applied(txn, index + 1)

    def access_keys(
        self, holder_id: bytes, grant_id: bytes | None
    ) -> list[tuple[Namespace, bytes]]:
        """The keys an authentication reads (saihm/store/auth.py), to be fetched at once: the
        holder's record, the sealed revocation count and, for a grant, the grant's record."""
        keys = [(self.db[HOLDERS], holder_id), (self.db[META], REVOCATIONS)]
        if grant_id is not None:
            keys.append((self.db[GRANTS], grant_id))
        return keys

    def mark_applied(self, txn: Txn, count: int) -> None:
        """Record that the first ``count`` leaves are reflected (same transaction as the state)."""
        self.meta.mark_applied(txn, count)


def first_difference(
    live: Projections, live_txn: Txn, fresh: Projections, fresh_txn: Txn
) -> str | None:
    """Compare every projection database bytewise; describe the first difference, or None."""
    for name in DB_NAMES:
        a = live.items(live_txn, name)
        b = fresh.items(fresh_txn, name)
        position = 0
        while True:
            x = next(a, None)
            y = next(b, None)
            if x is None and y is None:
                break
            if x != y:
                key = (x or y)[0].hex()  # type: ignore[index]
                return f"{name.decode()}: entry {position} differs (key {key[:80]})"
            position += 1
    return None


#: The ``by_operation`` key prefix of each operation (read from the operation registry).
_OPERATION_KEYS = OPERATION_KEYS
