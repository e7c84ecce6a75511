"""The store: sole owner of the storage, one write path, one checked read path.

:class:`Store` composes the parts of one data directory's store, each a class with explicit
dependencies (docs/internals.md "The store"):

- :mod:`~saihm.store.environment` opens the storage with every namespace, the log keys, the
  origin, the KEK directory and keyring, the record seal and the projections;
- :mod:`~saihm.store.commit` is the one write path (saihm-protocol "Order of effect and
  receipt"): signed :class:`Change` objects grouped into one write transaction per batch;
- :mod:`~saihm.store.auth` issues the :class:`Access` every read needs;
- :mod:`~saihm.store.read.reader` is the checked read path, the only code outside ``saihm.events``
  that decrypts (requirements.txt; tests/store/test_single_read_path.py);
- :mod:`~saihm.store.publiclog` signs checkpoints and serves the public log's reads;
- :mod:`~saihm.store.rebuild` replays the log into projections; :mod:`~saihm.store.keys`
  keeps holder keys and rotates the KEK;
- :mod:`~saihm.store.jobs` runs the checkpointer and the KEK schedule, started by the
  composition root (:meth:`Store.start_jobs`), never by opening a store;
- :mod:`~saihm.store.read.warm` embeds cached cells off the request path when the semantic stage
  is on (after a commit; the warm-up from :meth:`Store.start_jobs`).

- :mod:`~saihm.store.held` keeps the provider's held proposals (namespace ``provider-pending``),
  written through the same group commit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from saihm.config import Config
from saihm.events import Cell, Contract, Receipt
from saihm.events.identity import HolderKey
from saihm.projections import (
    Body,
    CellRecord,
    ContractRecord,
    GrantRecord,
    Projections,
    RecordHead,
    StaleProjections,
    u64,
)
from saihm.projections.keys import loads
from saihm.retrieval import Embedder, analyse_query, load_embedder
from saihm.storage import ReadTxn, Usage, WriteTxn
from saihm.store.auth import Access, Authenticator
from saihm.store.commit import Change, GroupCommit
from saihm.store.environment import (
    BODIES,
    CHECKPOINTS,
    MEMO,
    OWN_DBS,
    PENDING,
    STATS,
    STORAGE_NAMES,
    Environment,
    FaultHook,
    initialise,
)
from saihm.store.held import HeldProposals
from saihm.store.jobs import BackgroundJobs, JobBoard
from saihm.store.keys import CHECKPOINT_JOB, JOBS, KEK_JOB, HolderKeys, KeyRotation
from saihm.store.publiclog import PublicLog
from saihm.store.questions import Questions
from saihm.store.read.holderwide import ReadRequest
from saihm.store.read.reader import CheckedReader
from saihm.store.read.views import CellHeader, OpenedCell, Page, RecallWindow
from saihm.store.read.warm import Warmer
from saihm.store.rebuild import Rebuilder, RebuildFailed, RebuildReport, ReplaceReport

__all__ = [
    "BODIES",
    "CHECKPOINTS",
    "MEMO",
    "OWN_DBS",
    "PENDING",
    "STATS",
    "STORAGE_NAMES",
    "Access",
    "CellHeader",
    "Change",
    "HeldProposals",
    "OpenedCell",
    "Page",
    "Questions",
    "ReadRequest",
    "RebuildFailed",
    "RecallWindow",
    "StaleProjections",
    "Store",
]

log = logging.getLogger("saihm.store")


class Store:
    """The storage, the log, the keyring and the projections of one data directory.

    Opening a store starts no thread: the composition root calls :meth:`start_jobs` (with an
    embedder, the first commit also starts the embedding worker; :meth:`close` stops it).
    """

    def __init__(
        self,
        config: Config,
        *,
        clock: Callable[[], float] = time.time,
        fault_hook: FaultHook | None = None,
        check_applied: bool = True,
        embedder: Embedder | None = None,
    ) -> None:
        """Open the store of ``config``; unless ``check_applied`` is False (``saihm rebuild``
        only), refuse with :class:`StaleProjections` when the projections do not reflect the
        whole log (saihm-protocol "Order of effect and receipt")."""
        if embedder is None and config.embedding_model is not None:
            embedder = load_embedder(config.embedding_model)  # before the storage opens
        env = Environment(config, clock=clock, fault_hook=fault_hook, check_applied=check_applied)
        self.env = env
        self.config = config
        self.clock = clock
        self.storage = env.storage
        self.tree = env.tree
        self.keyring = env.keyring
        self.kek_dir = env.kek_dir
        self.projections = env.projections
        self.record_seal = env.record_seal
        self.log_keys = env.log_keys
        #: The log's identity, fixed when the data directory was created (saihm/translog/origin.py).
        self.origin = env.origin
        self.authority_public_key = env.authority_public_key
        self.jobs = JobBoard(clock, JOBS)
        self.authenticator = Authenticator(env)
        self.reader = CheckedReader(env, self.authenticator, embedder)
        self.public_log = PublicLog(env)
        self.holder_keys = HolderKeys(env)
        self.rotation = KeyRotation(env, self.jobs, self.reader.cache.clear)
        self.rebuilder = Rebuilder(env)
        #: The embedding worker (saihm/store/read/warm.py), with the semantic stage only: its
        #: thread starts on the first commit or :meth:`start_jobs`, and stops on :meth:`close`.
        self.warmer = Warmer(self.reader) if embedder is not None else None
        after = [self._sync_cache, self._after_commit_fault, self._checkpoint_if_due]
        if self.warmer is not None:
            after.insert(1, self.warmer.wake)
        self.commits = GroupCommit(env, after)
        #: Pending proposals held outside the log; they commit through :attr:`commits`.
        self.held = HeldProposals(env, self.commits, self.reader)
        self.background: BackgroundJobs | None = None
        #: Whether this process committed a batch (the final checkpoint covers its writes).
        self._committed = False

    initialise = staticmethod(initialise)

    def start_jobs(self) -> BackgroundJobs:
        """Start the background jobs (the checkpointer, then the KEK schedule, every
        ``checkpoint_interval`` seconds); :meth:`close` stops them before the storage closes.
        For the composition root (saihm/compose.py, ``saihm serve``)."""
        if self.background is None:
            self.background = BackgroundJobs(
                self.jobs,
                self.config.checkpoint_interval,
                (
                    (CHECKPOINT_JOB, lambda: self.checkpoint_now()),
                    (KEK_JOB, lambda: self.rotate_kek_if_due()),
                ),
            )
        if self.warmer is not None:
            self.warmer.warm_up()
        return self.background.start()

    def close(self) -> None:
        """Stop the background jobs, sign a final checkpoint if this process wrote or ran the
        jobs (and the log grew), close the storage.

        A failing final checkpoint is logged and recorded (:meth:`job_health`), not raised:
        what was committed stays committed, and the next open's checkpoint covers it. A process
        that only read (``saihm rebuild`` of a damaged log, ``verify``) signs nothing.
        """
        ran_jobs = self.background is not None
        if self.warmer is not None:
            self.warmer.stop()
        if self.background is not None:
            self.background.stop()
        try:
            if self._committed or ran_jobs:
                interval = self.config.checkpoint_interval
                self.jobs.run(CHECKPOINT_JOB, self.checkpoint_now, interval)
        finally:
            self.env.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the write path (saihm/store/commit.py) ------------------------------------------

    def commit(self, change: Change) -> Change:
        """Apply ``change`` atomically with any others waiting (:meth:`GroupCommit.commit`)."""
        return self.commits.commit(change)

    def _sync_cache(self) -> None:
        """The post-commit cache sync, given the leaves the batch appended."""
        self.reader.sync_cache(self.commits.appended)

    def _after_commit_fault(self) -> None:
        self.env.fault("after_commit")

    def _checkpoint_if_due(self) -> None:
        """The post-commit checkpoint: signed when ``checkpoint_interval`` has passed since this
        process last signed one; recorded in :meth:`job_health`, never raised."""
        self._committed = True
        interval = self.config.checkpoint_interval
        if self.clock() - self.public_log.last_signed >= interval:
            self.jobs.run(CHECKPOINT_JOB, self.checkpoint_now, interval)

    # -- building a change (the private parts the operator never sees) ------------------

    def cell_change(
        self,
        cell: Cell,
        receipt: Receipt,
        session_id: bytes,
        *,
        deks: Sequence[tuple[bytes, bytes]] = (),
        record: tuple[int, bool] | None = None,
        guard: Callable[[WriteTxn], object] | None = None,
    ) -> Change:
        """The one :class:`Change` that stores the sealed ``cell`` with its REMEMBER
        ``receipt``: its private body (the cell, the session tag of ``session_id`` under the
        cell's holder, the record's ``(seq, ended)`` if it is a record cell), its memo and the
        wrapped ``deks``. ``guard`` runs inside the write transaction."""
        cell_bytes = cell.to_cbor()
        body = Body(
            cell_bytes,
            self.env.session_tag(cell.holder_id, session_id),
            None if record is None else record[0],
            False if record is None else record[1],
        )
        return Change(
            receipts=[receipt],
            bodies={cell.cell_id: body},
            deks=list(deks),
            memo=[(cell.cell_id, cell_bytes)],
            guard=guard,
        )

    def contract_change(
        self,
        contract: Contract,
        receipt: Receipt,
        guard: Callable[[WriteTxn], object] | None = None,
    ) -> Change:
        """The one :class:`Change` that stores the signed ``contract`` (its private body) with
        its SHARE ``receipt``; ``guard`` runs inside the write transaction."""
        return Change(
            receipts=[receipt],
            bodies={contract.contract_id: Body(contract.to_cbor())},
            guard=guard,
        )

    def record_head(self, txn: ReadTxn, holder_id: bytes, session_id: bytes) -> RecordHead | None:
        """The head of one holder's session record in ``txn`` (a write transaction's too, for
        a guard), or None before its first record cell."""
        return self.projections.cells.record_head(txn, self.env.session_tag(holder_id, session_id))

    def in_session(self, record: CellRecord, holder_id: bytes, session_id: bytes) -> bool:
        """Whether the cell ``record`` was stored into ``session_id`` of ``holder_id`` (its
        session tag matches)."""
        return record.session_tag == self.env.session_tag(holder_id, session_id)

    # -- capabilities (saihm/store/auth.py) ----------------------------------------------

    def authenticate(self, token: str | None) -> Access:
        """A bearer token as an :class:`Access` (:meth:`Authenticator.authenticate`)."""
        return self.authenticator.authenticate(token)

    def person_access(
        self, holder_id: bytes, session_id: bytes, ttl: int = 300, *, all_sessions: bool = False
    ) -> Access:
        """The person's in-process :class:`Access` (:meth:`Authenticator.person_access`)."""
        return self.authenticator.person_access(
            holder_id, session_id, ttl, all_sessions=all_sessions
        )

    # -- the checked read path (saihm/store/read/reader.py) -----------------------------------

    def read(
        self,
        access: Access,
        *,
        query: str | None = None,
        cell_ids: Iterable[bytes] | None = None,
        include_shared: bool = True,
    ) -> list[OpenedCell]:
        """Every cell ``access`` may see (optionally only ``cell_ids``) that matches ``query``,
        checked item by item: :meth:`read_page` without a window, cells only."""
        request = ReadRequest(access, analyse_query(query), cell_ids, include_shared)
        page = self.reader.read_page(request)
        return page.cells

    def check_opens(self, txn: ReadTxn, cell: Cell) -> None:
        """Raise unless ``cell`` opens (:meth:`CheckedReader.check_opens`)."""
        self.reader.check_opens(txn, cell)

    def memo_matches(self, txn: ReadTxn, cell_id: bytes, cell_bytes: bytes) -> bool:
        """Whether a stored memo, if any, is that of ``cell_bytes``
        (:meth:`CheckedReader.memo_matches`)."""
        return self.reader.memo_matches(txn, cell_id, cell_bytes)

    def session_tag(self, holder_id: bytes, session_id: bytes) -> bytes:
        """The private index key of one holder's session (an untrusted lookup hint)."""
        return self.env.session_tag(holder_id, session_id)

    # -- state the operator consults (metadata only, never plaintext) ---------------------

    @property
    def kek_version(self) -> int:
        """The KEK generation a new cell's DEK is wrapped under."""
        return self.kek_dir.current_version

    def kek_age(self, now: float) -> float:
        """Seconds since the KEK in force was issued at ``now`` (0 for a clock behind it)."""
        return max(0.0, now - self.kek_dir.issued_at(self.kek_dir.current_version))

    def usage(self) -> Usage:
        """The storage's space in use and the limit it may grow to (:meth:`Storage.usage`)."""
        return self.storage.usage()

    def log_sizes(self) -> tuple[int, int]:
        """(the log's size, the size its latest stored checkpoint covers, 0 for none), read in
        one snapshot."""
        with self.read_txn() as txn:
            size = self.tree.size(txn)
            latest = self.public_log.latest_stored(txn)
        return size, 0 if latest is None else latest[0]

    def holder_key(self, holder_id: bytes) -> HolderKey:
        """The custodied signing key of ``holder_id`` (:meth:`HolderKeys.get`). Taking it
        announces a change about to be signed to the group commit (:meth:`GroupCommit.announce`)."""
        self.commits.announce()
        return self.holder_keys.get(holder_id)

    def read_txn(self) -> ReadTxn:
        """A read-only snapshot (use as a context manager)."""
        return self.storage.read()

    # -- the store's questions (saihm/store/questions.py) --------------------------------

    def ask(self, txn: ReadTxn) -> Questions:
        """The store's questions in ``txn``, a transaction the caller holds (a guard's write
        transaction, or a read that also asks the store's other parts)."""
        return Questions(self.env, txn)

    @contextmanager
    def questions(self) -> Iterator[Questions]:
        """The store's questions in one read transaction of their own (a context manager):
        several answers from one snapshot."""
        with self.read_txn() as txn:
            yield Questions(self.env, txn)

    def cell_record(self, cell_id: bytes) -> CellRecord | None:
        """The cell's record, or None if never stored (:meth:`Questions.cell_record`)."""
        with self.questions() as q:
            return q.cell_record(cell_id)

    def holder_known(self, holder_id: bytes) -> bool:
        """Whether ``holder_id`` is a holder of this store (:meth:`Questions.holder_known`)."""
        with self.questions() as q:
            return q.holder_known(holder_id)

    def contract(self, contract_id: bytes) -> ContractRecord | None:
        """The contract's record, or None (:meth:`Questions.contract`)."""
        with self.questions() as q:
            return q.contract(contract_id)

    def grant(self, grant_id: bytes) -> GrantRecord | None:
        """The grant's record, or None (:meth:`Questions.grant`)."""
        with self.questions() as q:
            return q.grant(grant_id)

    def stats_since(self, start: int) -> tuple[int, int]:
        """(calls, calls within the service window) counted since ``start``."""
        calls = ok = 0
        with self.storage.read() as txn:
            for _, value in txn.scan(self.env.db[STATS], u64(start // 86_400)):
                c, k = cast(list[int], loads(value))  # written by GroupCommit._count_calls
                calls += c
                ok += k
        return calls, ok

    def body(self, subject_id: bytes) -> Body | None:
        """The private body stored for a subject (ciphertext and metadata only)."""
        with self.storage.read() as txn:
            raw = txn.get(subject_id, db=self.env.db[BODIES])
        return None if raw is None else Body.decode(raw)

    # -- background jobs and KEK rotation (saihm/store/jobs.py, keys.py) ------------------

    def job_health(self) -> dict[str, dict[str, object]]:
        """Each background job's ``last_success`` and ``last_failure`` (UNIX seconds on the
        store's clock, or None), ``last_error`` (a protocol code or errno name such as
        ``ENOSPC``, never a message) and ``consecutive_failures``.

        Jobs: ``checkpoint`` (the loop's and the post-commit checkpoint) and ``kek_rotation``
        (the schedule's check; a success is a check that rotated or found nothing due, or saw
        another process rotating). For ``/healthz`` and ``saihm_status`` extensions.
        """
        return self.jobs.snapshot()

    def rotate_kek(self, wait: float | None = None) -> int:
        """Rotate the KEK now (:meth:`KeyRotation.rotate`)."""
        return self.rotation.rotate(wait)

    def rotate_kek_if_due(self, now: float | None = None) -> int | None:
        """Rotate the KEK if the schedule says so (:meth:`KeyRotation.rotate_if_due`)."""
        return self.rotation.rotate_if_due(now)

    # -- rebuild (saihm/store/rebuild.py) ------------------------------------------------

    def rebuild_into(
        self,
        target: Path,
        progress: Callable[[int], None] | None = None,
        compare: Callable[[Projections, ReadTxn, Projections, ReadTxn], object] | None = None,
    ) -> RebuildReport:
        """Rebuild into a scratch storage and compare (:meth:`Rebuilder.rebuild_into`)."""
        return self.rebuilder.rebuild_into(target, progress, compare)

    def replace_projections(
        self, target: Path, progress: Callable[[int], None] | None = None
    ) -> ReplaceReport:
        """Repair the projections from the log (:meth:`Rebuilder.replace_projections`)."""
        return self.rebuilder.replace_projections(target, progress)

    # -- the public log (saihm/store/publiclog.py) ---------------------------------------

    def checkpoint_now(self) -> bytes:
        """Sign a checkpoint if the log grew; the latest note (:meth:`PublicLog.checkpoint_now`)."""
        return self.public_log.checkpoint_now()

    def add_cosignatures(self, size: int, lines: Sequence[bytes]) -> bytes:
        """Append verified witness cosignatures (:meth:`PublicLog.add_cosignatures`)."""
        return self.public_log.add_cosignatures(size, lines)

    def latest_checkpoint(self) -> bytes:
        """The newest signed checkpoint (signing one first if the log has none)."""
        with self.storage.read() as txn:
            latest = self.public_log.latest_stored(txn)
        return self.checkpoint_now() if latest is None else latest[1]

    def latest_witnessed_checkpoint(self, scan: int = 4096) -> bytes | None:
        """The newest cosigned checkpoint (:meth:`PublicLog.latest_witnessed_checkpoint`)."""
        return self.public_log.latest_witnessed_checkpoint(scan)

    def checkpoints(self) -> Iterator[tuple[int, bytes]]:
        """Every stored checkpoint, by size."""
        return self.public_log.checkpoints()

    def size(self) -> int:
        """The number of leaves in the log."""
        return self.public_log.size()

    def leaves(self, start: int, end: int) -> list[bytes]:
        """Leaves ``start`` (inclusive) to ``end`` (exclusive)."""
        return self.public_log.leaves(start, end)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """RFC 9162 inclusion proof of leaf ``index`` in the tree of ``size`` leaves."""
        return self.public_log.inclusion_proof(index, size)

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        """RFC 9162 consistency proof between two tree sizes."""
        return self.public_log.consistency_proof(size1, size2)

    def root(self, size: int) -> bytes:
        """The root hash at ``size``."""
        return self.public_log.root(size)

    def tile(self, level: int, index: int, width: int | None) -> bytes:
        """A C2SP tlog-tiles hash tile, byte-exact."""
        return self.public_log.tile(level, index, width)

    def entry_bundle(self, index: int, width: int | None) -> bytes:
        """A C2SP tlog-tiles entry bundle, byte-exact."""
        return self.public_log.entry_bundle(index, width)

    def receipt(self, receipt_id: bytes) -> tuple[int, bytes]:
        """(leaf index, leaf) of a receipt, or ``NotFound``."""
        return self.public_log.receipt(receipt_id)

    def receipts(
        self, by: str, value: bytes, cursor: int = 0, limit: int = 100
    ) -> tuple[list[tuple[int, bytes]], int | None]:
        """Receipts by subjectId, holderId or operation (:meth:`PublicLog.receipts`)."""
        return self.public_log.receipts(by, value, cursor, limit)

    def erasures(self) -> tuple[list[bytes], int]:
        """The public erasure list and the tree size it reflects."""
        return self.public_log.erasures()
