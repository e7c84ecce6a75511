"""The write path: a :class:`Change` and the group commit that applies it (DESIGN.md).

saihm-protocol "Order of effect and receipt": an operation arrives as a :class:`Change` whose
receipts are already signed (signing happens outside any transaction). Concurrent changes are
grouped into one write transaction, in which each change's guard re-checks its rule against
current state, its receipts become leaves, its private parts (cells, contracts, wrapped keys)
are stored and the projections apply. Effect and receipt commit together or not at all; work
after the commit (the callbacks :class:`GroupCommit` is given) is logged, never raised.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from saihm.errors import SaihmError, Unavailable
from saihm.events import Receipt
from saihm.projections import Body, LeafView, u64
from saihm.projections.apply import RECEIPT_IDS
from saihm.projections.keys import dumps, loads
from saihm.storage.base import Namespace, StorageError, StorageFull, WriteTxn, prefetch
from saihm.store.environment import BODIES, MEMO, PENDING, PERSON, STATS, Environment
from saihm.store.jobs import error_code

log = logging.getLogger("saihm.store")

#: How long a committer lets its batch gather company when other writers are signing (s).
BATCH_WINDOW = 300e-6
#: Per storage driver (``Storage.kind``) whose commit is expensive, the longest a batch may
#: wait for writers that are signing (s): up to the time its recent commits took, never more
#: than this. A PostgreSQL commit holds the one write lock every node shares for round trips,
#: the store's work and a WAL flush (several ms), so a remember that joins a batch instead of
#: committing after it saves a whole commit, and the lock hold per remember falls as the
#: batch grows. An LMDB commit is local and cheap: :data:`BATCH_WINDOW` alone.
COMMIT_FOLLOWING_WINDOW: dict[str, float] = {"postgresql": 0.008}
#: How much of each new commit's time the running estimate takes in (an exponential mean).
COMMIT_TIME_WEIGHT = 0.25
#: An announced writer (:meth:`GroupCommit.announce`) counts as still signing for this long
#: (s): one that announced and then failed before queueing stops holding batches after it.
SIGNING_TTL = 0.05


@dataclass(eq=False)
class Change:
    """One operation's effect: signed receipts plus private writes, applied atomically.

    ``guard`` runs inside the write transaction before anything is written; it raises a
    :class:`SaihmError` to refuse the change or returns a non-None value to answer without
    writing (an idempotent repeat). ``outcome`` is then that value, or the leaf indexes.
    """

    receipts: list[Receipt]
    bodies: dict[bytes, Body] = field(default_factory=dict)
    deks: list[tuple[bytes, bytes]] = field(default_factory=list)
    seeds: list[tuple[bytes, bytes]] = field(default_factory=list)
    destroy: list[bytes] = field(default_factory=list)
    memo: list[tuple[bytes, bytes]] = field(default_factory=list)
    #: Held proposals to store (proposalId, entry) and to remove (saihm/store/held.py).
    held: list[tuple[bytes, bytes]] = field(default_factory=list)
    released: list[bytes] = field(default_factory=list)
    #: The person's records to put (key, sealed value) or remove (key, None), in namespace
    #: ``person`` (saihm/authority/person.py decides them in ``guard``).
    person: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    guard: Callable[[WriteTxn], object] | None = None
    outcome: object = None
    error: BaseException | None = None
    done: bool = False
    indexes: list[int] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    #: What :meth:`GroupCommit.commit` computes from the fields above before the change
    #: queues (:meth:`Change.prepare`), so the write transaction does not: the receipts'
    #: leaves and their public fields, the bodies' bytes and the memos' values.
    leaves: list[bytes] = field(default_factory=list)
    views: list[LeafView] = field(default_factory=list)
    encoded_bodies: list[tuple[bytes, bytes]] = field(default_factory=list)
    memo_values: list[tuple[bytes, bytes]] = field(default_factory=list)
    prepared: bool = False

    def prepare(self, memo: Callable[[bytes], bytes]) -> None:
        """Encode what the write transaction stores and reads back as it is, once, in the
        caller's thread: the committer holds the commit slot (and, on PostgreSQL, the lock
        every node shares) for less. ``memo`` makes a verified-cell memo's value."""
        if self.prepared:
            return
        self.leaves = [receipt.to_cbor() for receipt in self.receipts]
        # The same input a rebuild reads: the leaf as stored, not the model it came from.
        self.views = [LeafView.from_leaf(leaf) for leaf in self.leaves]
        self.encoded_bodies = [(sid, body.encode()) for sid, body in self.bodies.items()]
        self.memo_values = [(cell_id, memo(cell_bytes)) for cell_id, cell_bytes in self.memo]
        self.prepared = True


class GroupCommit:
    """The store's one write path over an :class:`Environment`.

    ``after_commit`` runs once a batch has committed, before any of its changes is
    acknowledged, in order; the first that raises is logged (its class or errno name only) and
    ends the post-commit work of that batch: it never turns a committed change into an error.

    One batch at a time holds the write transaction (the commit slot). Its committer gives the
    slot up as soon as the transaction has committed, so the next batch can gather and commit
    while this one's post-commit work runs; the post-commit work of successive batches runs one
    batch at a time, in commit order (the callbacks need not be thread-safe), and a change is
    acknowledged only after its own batch's post-commit work (read-your-writes: a read right
    after a commit sees it in the cache too).

    A writer announces itself (:meth:`announce`) before it signs; a committer whose batch would
    leave an announced writer behind waits for it to queue up to :attr:`window` seconds or, on
    a storage whose commit is expensive (:data:`COMMIT_FOLLOWING_WINDOW`), up to the time its
    recent commits took (:attr:`commit_seconds`) within :attr:`follow_limit`, whichever is
    longer; it never waits when no other writer is signing. A writer that would otherwise queue
    behind this batch's commit is answered after one commit instead of two, and the batch
    shares one commit: under load batches grow and a write lock shared by every node is held
    less per change (docs/scaling.md "Batches grow with the cost of a commit").
    """

    def __init__(self, env: Environment, after_commit: Sequence[Callable[[], None]] = ()) -> None:
        self.env = env
        self.after_commit = list(after_commit)
        self._lock = threading.RLock()
        self._cv = threading.Condition(self._lock)
        #: Wakes a committer gathering its batch when a change is queued.
        self._arrived = threading.Condition(self._lock)
        self._queue: list[Change] = []
        self._committing = False
        #: Threads that announced a change and have not queued it yet: ident -> when (monotonic).
        self._signing: dict[int, float] = {}
        #: The longest a batch waits for announced writers (s) whatever its commits cost; 0
        #: turns this window off.
        self.window = BATCH_WINDOW
        #: The longest a batch waits for announced writers when its recent commits took that
        #: long (s); 0, the default but for an expensive commit, waits only :attr:`window`.
        self.follow_limit = COMMIT_FOLLOWING_WINDOW.get(env.storage.kind, 0.0)
        #: The running estimate of how long a batch's write transaction takes (s).
        self.commit_seconds = 0.0
        #: How long an announcement counts (s) if its change is never queued.
        self.signing_ttl = SIGNING_TTL
        #: Held from a batch's commit until its post-commit work ends: the post-commit work of
        #: successive batches runs one at a time, in commit order.
        self._after_lock = threading.Lock()
        #: A path on the volume the data is written to (the free-disk check): the LMDB
        #: directory, else DATA.
        storage = env.storage
        self._volume = Path(storage.location) if storage.kind == "lmdb" else env.config.data_dir
        #: The leaves the last committed batch appended: its first index and their public
        #: fields, for the post-commit work of that batch (:meth:`appended`).
        self._appended: tuple[int, list[LeafView]] = (0, [])
        #: The same for the batch holding the commit slot (written and read under it).
        self._batch_appended: tuple[int, list[LeafView]] = (0, [])

    def commit(self, change: Change) -> Change:
        """Apply ``change`` atomically with any others waiting; return it with its outcome.

        Raises the change's own refusal (from its guard), or :class:`Unavailable` when the
        transaction could not commit, in which case nothing of it took effect.
        """
        try:
            change.prepare(self.env.memo)
        except Exception as err:
            # What the operator built does not encode: nothing was queued or written.
            with self._lock:
                self._signing.pop(threading.get_ident(), None)
            log.error("a change could not be encoded: %s", type(err).__name__)
            raise Unavailable("storage unavailable") from None
        with self._cv:
            self._signing.pop(threading.get_ident(), None)
            self._queue.append(change)
            self._arrived.notify()
            while not change.done:
                if self._committing or change not in self._queue:
                    # Another thread commits now, or has taken this change into its batch.
                    self._cv.wait()
                    continue
                self._committing = True
                self._gather()
                batch, self._queue = self._queue, []
                self._cv.release()
                try:
                    self._write_batch(batch)
                finally:
                    self._cv.acquire()
        if change.error is not None:
            raise change.error
        return change

    def announce(self) -> None:
        """Say that this thread is about to build a change (sign its receipts) and commit it:
        until it does (or :attr:`signing_ttl` passes), a committer may wait up to
        :attr:`window` for it, so that its change shares a batch (and an fsync)."""
        with self._lock:
            self._signing[threading.get_ident()] = time.monotonic()

    def gather_window(self) -> float:
        """How long a batch may wait now for announced writers (s): :attr:`window`, or the
        estimated commit time (:attr:`commit_seconds`) bounded by :attr:`follow_limit` if that
        is longer."""
        return max(self.window, min(self.commit_seconds, self.follow_limit))

    def _gather(self) -> None:
        """Holding the slot (and the lock), wait up to :meth:`gather_window` while announced
        writers have yet to queue; return at once when none is signing."""
        deadline = None
        while True:
            now = time.monotonic()
            signing = [t for t, at in self._signing.items() if now - at <= self.signing_ttl]
            if len(signing) != len(self._signing):
                self._signing = {t: self._signing[t] for t in signing}
            if not signing:
                return
            if deadline is None:
                window = self.gather_window()
                if window <= 0:
                    return
                deadline = now + window
            elif now >= deadline:
                return
            self._arrived.wait(deadline - now)

    @property
    def appended(self) -> tuple[int, list[LeafView]]:
        """For the post-commit work (:attr:`after_commit`) of a batch: the index of the first
        leaf it appended and the public fields of its leaves, in order."""
        return self._appended

    def _learn_commit_time(self, seconds: float) -> None:
        """Take a batch's write transaction time into :attr:`commit_seconds`."""
        with self._lock:
            if self.commit_seconds <= 0:
                self.commit_seconds = seconds
            else:
                self.commit_seconds += COMMIT_TIME_WEIGHT * (seconds - self.commit_seconds)

    def _release_slot(self) -> None:
        """Let the next batch take the write transaction."""
        with self._cv:
            self._committing = False
            self._cv.notify_all()

    def _write_batch(self, batch: list[Change]) -> None:
        """Commit ``batch`` in one write transaction, give up the commit slot, run the
        post-commit work, then acknowledge the batch's changes.

        Refuses the whole batch (``Unavailable``, nothing written) when the data volume is
        below the free-disk floor. A batch that does not fit (``StorageFull``: the LMDB map is
        full) is aborted, the storage grown (``Storage.grow``: the map up to ``map_size_max``)
        and the batch tried once more from the start; at the ceiling it is refused. Work after
        the commit (the fault hook, the checkpoint) is logged and recorded, never raised: a
        committed change is answered as committed.
        """
        slot_held = True
        try:
            refusal = self._storage_refusal()
            began = time.monotonic()
            applied = [] if refusal else self._commit_batch(batch)
            if applied:
                self._learn_commit_time(time.monotonic() - began)
            if refusal:
                for change in batch:
                    change.error = refusal
            if applied:
                # Taken before the slot is given up, so the post-commit work of the batches
                # runs in the order they committed.
                self._after_lock.acquire()
                self._appended = self._batch_appended
            self._release_slot()
            slot_held = False
            if applied:
                try:
                    self._after_commit()
                finally:
                    self._after_lock.release()
        finally:
            if slot_held:
                self._release_slot()
            with self._cv:
                for change in batch:
                    change.done = True
                self._cv.notify_all()

    def _storage_refusal(self) -> Unavailable | None:
        """``Unavailable`` when the data volume has less than ``min_free_disk`` bytes free."""
        floor = self.env.config.min_free_disk
        if floor <= 0:
            return None
        try:
            free = shutil.disk_usage(self._volume).free
        except OSError as err:
            log.error("cannot read free disk space: %s", type(err).__name__)
            return Unavailable("storage unavailable: free disk space unknown")
        if free < floor:
            log.error("write refused: %d bytes free on the data volume, floor %d", free, floor)
            return Unavailable("storage unavailable: the data volume is below its free floor")
        return None

    def _commit_batch(self, batch: list[Change]) -> list[Change]:
        """Write ``batch``; return the changes that took effect (their receipts are logged)."""
        for attempt in (0, 1):
            for change in batch:
                change.error, change.outcome, change.indexes = None, None, []
            try:
                return self._try_batch(batch)
            except StorageFull:
                # The transaction was aborted: nothing of the batch is stored, so a retry
                # after growing cannot apply any change twice.
                if attempt == 0 and self._grow_map():
                    continue
                ceiling = self.env.storage.usage().limit
                log.error("write refused: the storage is full at its ceiling (%s bytes)", ceiling)
                self._refuse(batch, [], Unavailable("storage unavailable: the map is full"))
                return []
            except Exception as err:
                # A transaction that fails is aborted, so nothing of the batch should be there;
                # the protocol still says to look a receipt up before answering when unsure.
                log.error("write transaction failed: %s", type(err).__name__)
                applied = [c for c in batch if c.indexes and self._receipts_written(c)]
                self._refuse(batch, applied, Unavailable("storage unavailable"))
                return applied
        return []  # pragma: no cover - the loop returns

    def _grow_map(self) -> bool:
        try:
            return self.env.storage.grow()
        except SaihmError as err:
            log.error("cannot grow the storage: %s", err.code)
            return False

    @staticmethod
    def _refuse(batch: list[Change], applied: list[Change], error: Unavailable) -> None:
        for change in batch:
            if change in applied:
                continue
            if change.error is None:
                change.error = error
            change.outcome = None

    def _try_batch(self, batch: list[Change]) -> list[Change]:
        applied: list[Change] = []
        self._batch_appended = (0, [])  # set once this batch's leaves are known
        with self.env.storage.write() as txn:
            prefetch(txn, self._looked_up(batch))
            # Guards and projections read projections, never the tree: each change is
            # applied before the next guard runs, and all leaves go into the tree at once.
            first = self.env.tree.size(txn)
            # The KEK state, read afresh once per transaction now that it holds the write lock
            # (Keyring.current_kek), for every key the batch wraps.
            wraps = any(change.deks or change.seeds for change in batch)
            kek = self.env.keyring.current_kek() if wraps else None
            leaves: list[bytes] = []
            for change in batch:
                try:
                    outcome = change.guard(txn) if change.guard else None
                except SaihmError as err:
                    change.error = err
                    continue
                if outcome is not None:
                    change.outcome = outcome
                    continue
                leaves.extend(self._write_change(txn, change, first + len(leaves), kek))
                applied.append(change)
            self._batch_appended = (first, [v for change in applied for v in change.views])
            if leaves:
                appended_at = self.env.tree.append(txn, leaves)
                if appended_at != first:
                    raise RuntimeError("the tree grew inside this write transaction")
                # The applied count (with the revocation count it carries) once per batch, as
                # a rebuild writes it once per chunk: the same bytes as one write per leaf.
                self.env.projections.mark_applied(txn, first + len(leaves))
                self._count_calls(txn, applied)
            self.env.fault("before_commit")
        return applied

    def _looked_up(self, batch: list[Change]) -> Iterator[tuple[Namespace, bytes]]:
        """The keys the batch's private writes read before they write (:meth:`_write_change`):
        a new wrapped DEK's and seed's key, which must be free (the keyring puts them with
        ``overwrite=False``: namespaces ``deks`` and ``seeds``), a destroyed DEK's and a
        released proposal's (a delete looks first). Fresh random keys that no earlier
        transaction read, so nothing else would fetch them before they are asked for."""
        deks = self.env.storage.namespace(b"deks")
        seeds = self.env.storage.namespace(b"seeds")
        for change in batch:
            yield from ((deks, cell_id) for cell_id, _ in change.deks)
            yield from ((seeds, holder_id) for holder_id, _ in change.seeds)
            yield from ((deks, cell_id) for cell_id in change.destroy)
            yield from ((self.env.db[PENDING], proposal_id) for proposal_id in change.released)

    def _after_commit(self) -> None:
        """Post-commit work. It runs after the changes are durable and answers nothing: a
        failure is logged (and recorded in job health by the callback that runs a job), never
        raised."""
        try:
            for callback in self.after_commit:
                callback()
        except Exception as err:
            log.error("post-commit work failed: %s", error_code(err))

    def _receipts_written(self, change: Change) -> bool:
        """Whether ``change``'s receipts are in the log (saihm-protocol "Order of effect and
        receipt": "it MUST look the receipt up by its receiptId before answering")."""
        try:
            with self.env.storage.read() as txn:
                db = self.env.projections.db[RECEIPT_IDS]
                found = [txn.get(r.receipt_id, db=db) for r in change.receipts]
        except StorageError:
            return False
        if all(found):
            change.indexes = [int.from_bytes(raw, "big") for raw in found if raw]
            return True
        return False

    def _write_change(
        self, txn: WriteTxn, change: Change, first: int, kek: tuple[int, bytes] | None = None
    ) -> list[bytes]:
        """Store ``change``'s private parts (keys wrapped under ``kek``, the generation this
        transaction read) and apply its receipts, numbered from ``first``, to the projections;
        return its leaves for the caller to append to the tree."""
        for subject_id, body_bytes in change.encoded_bodies:
            txn.put(subject_id, body_bytes, db=self.env.db[BODIES])
        for holder_id, seed in change.seeds:
            self.env.keyring.put_seed(txn, holder_id, seed, kek)
        for cell_id, dek in change.deks:
            self.env.keyring.put_dek(txn, cell_id, dek, kek)
        for cell_id, memo in change.memo_values:
            txn.put(cell_id, memo, db=self.env.db[MEMO])
        for cell_id in change.destroy:
            self.env.keyring.destroy(txn, cell_id)
        for proposal_id in change.released:
            txn.delete(proposal_id, db=self.env.db[PENDING])
        for proposal_id, entry in change.held:
            txn.put(proposal_id, entry, db=self.env.db[PENDING])
        for key, value in change.person:
            if value is None:
                txn.delete(key, db=self.env.db[PERSON])
            else:
                txn.put(key, value, db=self.env.db[PERSON])
        for offset, (receipt, view) in enumerate(zip(change.receipts, change.views, strict=True)):
            leaf_body = change.bodies.get(receipt.subject_id)
            self.env.projections.apply(txn, first + offset, view, leaf_body, record_applied=False)
            change.indexes.append(first + offset)
        return change.leaves

    def _count_calls(self, txn: WriteTxn, applied: list[Change]) -> None:
        """Count the batch's calls, and those within the service window, for ``prs``: the
        changes that logged receipts (a held proposal's write is not a call of its own)."""
        applied = [change for change in applied if change.receipts]
        now = time.monotonic()
        window = self.env.config.service_window_ms / 1000
        within = sum(now - change.started <= window for change in applied)
        day = u64(int(self.env.clock()) // 86_400)
        raw = txn.get(day, db=self.env.db[STATS])
        try:
            # The counter's one writer is the put below: a list of two ints.
            calls, ok = (0, 0) if raw is None else cast(list[int], loads(raw))
        except Exception as err:  # a damaged counter must not refuse the batch's writes
            log.error("statistics for this day unreadable (%s); counting afresh", error_code(err))
            calls, ok = 0, 0
        txn.put(day, dumps([calls + len(applied), ok + within]), db=self.env.db[STATS])
