"""Replaying the log into projections: ``saihm rebuild`` (compare or ``--replace``) and fsck.

saihm-protocol "Order of effect and receipt": the projections are derived state, a function of
the log's leaves and the private bodies they name; a rebuild from the log must reproduce them
byte for byte (docs/operations.md "Rebuild").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, NotRequired, TypedDict, TypeVar

from saihm.errors import VerificationFailed
from saihm.events.operations import BY_NAME
from saihm.projections import Body, Projections, ProjectionState
from saihm.projections import apply as P
from saihm.projections.bulk import LeafFailed, apply_leaves
from saihm.storage import ReadTxn, WriteTxn
from saihm.storage.lmdb import LmdbStorage
from saihm.store.environment import BODIES, Environment

T = TypeVar("T")
#: The operations whose private body the store keeps under the subjectId (from the registry).
_BODY_OPERATIONS = frozenset(name for name, spec in BY_NAME.items() if spec.body)
_COPY_CHUNK = 4096  # pairs per put_many when copying rebuilt projections into the live storage
#: Leaves applied per transaction of a rebuild: their rows are held in memory and written
#: sorted, one put_many per namespace (saihm/projections/bulk.py).
LEAVES_PER_TXN = 16384


class RebuildFailed(VerificationFailed):
    """The log cannot be replayed into projections (a private body is missing or damaged)."""


class RebuildReport(TypedDict):
    """What :meth:`Rebuilder.rebuild_into` found (printed by ``saihm rebuild``)."""

    events: int
    seconds: float
    identical: bool
    difference: str | None
    compared: NotRequired[object]


class ReplaceReport(TypedDict):
    """What :meth:`Rebuilder.replace_projections` did (printed by ``saihm rebuild --replace``)."""

    events: int
    seconds: float
    replaced: int
    caughtUp: int


class Rebuilder:
    """Rebuilds the projections of an :class:`Environment` from its log."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    def rebuild_into(
        self,
        target: Path,
        progress: Callable[[int], None] | None = None,
        compare: Callable[[Projections, ReadTxn, Projections, ReadTxn], object] | None = None,
    ) -> RebuildReport:
        """Rebuild every projection from the log into a fresh scratch storage and compare
        bytewise.

        Returns ``{"events", "seconds", "identical", "difference"}``; the comparison runs on
        one read snapshot of the live storage, at the size the rebuild covered. With
        ``compare``, its result over (live, live txn, fresh, fresh txn) is also returned, as
        ``"compared"`` (the fsck lists every difference this way).
        """
        scratch = self.scratch_storage(target)
        compared = None
        try:
            fresh = Projections(scratch, self.env.record_seal)
            started = time.perf_counter()
            with self.env.storage.read() as live_txn:
                size = self.env.tree.size(live_txn)
                self.rebuild_from(live_txn, fresh, size, progress)
                seconds = time.perf_counter() - started
                with scratch.read() as fresh_txn:
                    difference = P.first_difference(
                        self.env.projections, live_txn, fresh, fresh_txn
                    )
                    if compare is not None:
                        compared = compare(self.env.projections, live_txn, fresh, fresh_txn)
        finally:
            scratch.close()
        report: RebuildReport = {
            "events": size,
            "seconds": seconds,
            "identical": difference is None,
            "difference": difference,
        }
        if compare is not None:
            report["compared"] = compared
        return report

    def replace_projections(
        self, target: Path, progress: Callable[[int], None] | None = None
    ) -> ReplaceReport:
        """Repair the projections from the log (``saihm rebuild --replace``), atomically.

        The log is replayed into a scratch LMDB storage at ``target`` (a temporary directory)
        from a read snapshot; then one write transaction of the live storage (whatever its
        driver; it excludes every other writer, so a running server's writes wait, and see
        either the old or the new projections) empties every projection namespace, copies the
        rebuilt ones in, and applies any leaves appended since the snapshot. Returns
        ``{"events", "seconds", "replaced", "caughtUp"}``.
        """
        scratch = self.scratch_storage(target)
        try:
            fresh = Projections(scratch, self.env.record_seal)
            started = time.perf_counter()
            with self.env.storage.read() as live_txn:
                size = self.env.tree.size(live_txn)
                self.rebuild_from(live_txn, fresh, size, progress)
            replaced = 0
            with self.env.storage.write() as txn, scratch.read() as fresh_txn:
                for name in Projections.DB_NAMES:
                    db = self.env.projections.db[name]
                    txn.clear(db)
                    pairs = fresh_txn.scan(fresh.db[name])
                    while chunk := list(islice(pairs, _COPY_CHUNK)):
                        txn.put_many(chunk, db=db, append=True)
                        replaced += len(chunk)
                grown = self.env.tree.size(txn)
                self.rebuild_from(txn, self.env.projections, grown, None, start=size, live=txn)
            seconds = time.perf_counter() - started
        finally:
            scratch.close()
        caught_up = grown - size
        return {"events": grown, "seconds": seconds, "replaced": replaced, "caughtUp": caught_up}

    def scratch_storage(
        self, target: Path, names: Sequence[bytes] = Projections.DB_NAMES
    ) -> LmdbStorage:
        """A fresh, non-durable LMDB storage at ``target`` (a new directory) with ``names``,
        its map sized for a copy of the live storage's data, whatever the live driver."""
        target.mkdir(parents=True, exist_ok=False)
        usage = self.env.storage.usage()
        size = max(self.env.config.map_size, usage.capacity or 0, 2 * usage.used)
        # The scratch storage is compared or copied, then thrown away: it needs no durable
        # commits.
        return LmdbStorage(target, names, map_size=size, sync=False, writemap=True)

    def rebuild_from(
        self,
        live_txn: ReadTxn,
        into: Projections,
        size: int,
        progress: Callable[[int], None] | None,
        *,
        start: int = 0,
        live: WriteTxn | None = None,
    ) -> None:
        """Apply leaves ``start..size`` of the live log to ``into``: in chunks of fresh write
        transactions of ``into``'s storage, or all in ``live`` (a live write txn)."""
        if not self.env.tree.dense(live_txn):
            # A leaf row inserted far past the end would make the loop below run for ever.
            raise RebuildFailed(
                "the log's leaves are not the dense indexes 0 to its size - 1 (a leaf was "
                "inserted or deleted): run saihm verify --data DIR"
            )
        bodies = self.env.db[BODIES]

        def body_of(operation: str, subject_id: bytes) -> Body | None:
            if operation not in _BODY_OPERATIONS:
                return None
            raw = live_txn.get(subject_id, db=bodies)
            return None if raw is None else Body.decode(raw)

        for first in range(start, size, LEAVES_PER_TXN):
            leaves = self.env.tree.leaves(live_txn, first, min(size, first + LEAVES_PER_TXN))
            txn = live if live is not None else into.storage.write()
            try:
                apply_leaves(into, txn, first, leaves, body_of, count=first + len(leaves))
            except LeafFailed as err:
                if live is None:
                    txn.abort()
                # A damaged leaf or body (the public check names a damaged leaf).
                cause = type(err.__cause__).__name__
                raise RebuildFailed(
                    f"leaf {err.index} cannot be applied: {cause}"
                ) from err.__cause__
            except BaseException:
                if live is None:
                    txn.abort()
                raise
            if live is None:
                txn.commit()
            if progress is not None:
                progress(len(leaves))

    # -- what the offline check (saihm/offline/fsck.py) asks of the live projections ----------

    def projection_state(self, txn: ReadTxn) -> ProjectionState:
        """The live projections' applied index and schema version in ``txn``, as stored
        (:class:`StaleProjections` when either is damaged)."""
        return self.env.projections.state(txn)

    def sealed_rows(self, txn: ReadTxn) -> Iterator[tuple[bytes, bytes, bytes]]:
        """Every MAC-bound record of the live projections in ``txn``, as stored: (database,
        key, value), the databases in name order, each in key order."""
        for name in sorted(P.SEALED):
            for key, value in self.env.projections.items(txn, name):
                yield name, bytes(key), bytes(value)

    def compare_live(
        self,
        txn: ReadTxn,
        fresh: Projections,
        fresh_txn: ReadTxn,
        compare: Callable[[Projections, ReadTxn, Projections, ReadTxn], T],
    ) -> T:
        """``compare`` over (live, ``txn``, ``fresh``, ``fresh_txn``): the live projections
        held against a rebuild, as :meth:`rebuild_into` does with its ``compare``."""
        return compare(self.env.projections, txn, fresh, fresh_txn)


def raw_put_seconds(rebuilt: Path, target: Path, events: int) -> tuple[float, int]:
    """The peer of a rebuild for ``saihm bench store``: seconds raw LMDB takes to put every
    projection row the scratch storage at ``rebuilt`` holds into a fresh environment at
    ``target``, and how many rows. One ``put`` of the lmdb binding per row, namespace by
    namespace in key order, with the flags of :meth:`Rebuilder.scratch_storage` and a commit
    every as many rows as a rebuild of ``events`` leaves writes per transaction; reading the
    rows out is not timed."""
    names = Projections.DB_NAMES
    source = LmdbStorage(rebuilt, names, readonly=True, lock=False)
    try:
        with source.read() as snapshot:
            rows = [(name, list(snapshot.scan(source.namespace(name)))) for name in names]
        map_size = source.map_size
    finally:
        source.close()
    total = sum(len(pairs) for _, pairs in rows)
    per_commit = max(1, total * LEAVES_PER_TXN // max(1, events))
    target.mkdir(parents=True, exist_ok=False)
    out = LmdbStorage(target, names, map_size=map_size, sync=False, writemap=True)
    try:
        env = out.env  # the binding itself, without the driver's wrappers
        handles: dict[bytes, Any] = {name: out.namespace(name).handle for name in names}
        started = time.perf_counter()
        txn, in_txn = env.begin(write=True), 0
        for name, pairs in rows:
            db, put = handles[name], txn.put
            for key, value in pairs:
                put(key, value, db=db)
                in_txn += 1
                if in_txn == per_commit:
                    txn.commit()
                    txn, in_txn = env.begin(write=True), 0
                    put = txn.put
        txn.commit()
        return time.perf_counter() - started, total
    finally:
        out.close()
