"""The store: sole owner of the storage, one write path, one checked read path.

Write path (saihm-protocol "Order of effect and receipt"): :mod:`saihm.changes` — signed
:class:`Change` objects grouped into one write transaction per batch, effect and receipt
committed together or not at all. Public reads of the log: :mod:`saihm.publiclog`.

Read path (requirements.txt): every read of a cell goes through :meth:`Store.read`, which takes
an :class:`Access` that only :meth:`Store.authenticate` makes from an authority-signed token,
and checks each item against it after verifying the cell and decrypting its sealed label.
Candidate indexes are hints; the label decides. This module is the only one that opens the
operator's storage (:func:`saihm.storage.open_storage`: LMDB in ``DATA/lmdb`` or PostgreSQL)
and the only one outside ``saihm.events`` that decrypts (tests/store/test_single_read_path.py).
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from saihm.cellcache import CacheView, CellCache, CellHeader, OpenedCell, Page
from saihm.changes import BODIES, MEMO, STATS, Change, GroupCommit
from saihm.config import Config
from saihm.errors import (
    Conflict,
    NotFound,
    SaihmError,
    Unauthenticated,
    Unavailable,
    VerificationFailed,
)
from saihm.events import Capability, Cell, SealedPayload
from saihm.events.envelope import check_cell_id, decrypt, verify_cell_signature
from saihm.events.identity import HolderKey
from saihm.events.signing import verify_capability
from saihm.jobs import JobBoard
from saihm.keyring import KekDirectory, Keyring, KeyringError, RotationBusy
from saihm.origin import generate_log_keys, record_origin, recorded_origin, settle_origin
from saihm.projections import (
    Body,
    LeafView,
    Projections,
    RecordError,
    RecordSeal,
    StaleProjections,
    derive_record_key,
    u64,
)
from saihm.projections import apply as P
from saihm.projections.keys import dumps, loads
from saihm.publiclog import CHECKPOINTS, PublicLog
from saihm.retrieval import Embedder, Query, analyse_query, load_embedder
from saihm.retrieval.embed import cosine
from saihm.retrieval.rank import rank
from saihm.storage import Namespace, ReadTxn, Storage, StorageFull, WriteTxn, open_storage
from saihm.storage.lmdb import LmdbStorage
from saihm.storeurl import record_store_elsewhere, refuse_migrated
from saihm.translog import Checkpoint, LogKeys, TreeStorage
from saihm.translog.witness import append_cosignatures

log = logging.getLogger("saihm.store")

PENDING = b"provider-pending"  # proposalId -> {1: cell CBOR, 2: caller's meta}; not a projection
OWN_DBS = (BODIES, CHECKPOINTS, MEMO, STATS, PENDING)
CHECKPOINT_JOB = "checkpoint"
KEK_JOB = "kek_rotation"
JOBS = (CHECKPOINT_JOB, KEK_JOB)

#: Every namespace the store opens its storage with.
STORAGE_NAMES: tuple[bytes, ...] = (
    *TreeStorage.DB_NAMES,
    *Keyring.DB_NAMES,
    *Projections.DB_NAMES,
    *OWN_DBS,
)

FaultHook = Callable[[str], None]
Narrow = Callable[[SealedPayload], bool] | None
_BODY_OPERATIONS = frozenset({"REMEMBER", "SHARE"})
_COPY_CHUNK = 4096  # pairs per put_many when copying rebuilt projections into the live storage


class RebuildFailed(VerificationFailed):
    """The log cannot be replayed into projections (a private body is missing or damaged)."""


@dataclass(frozen=True)
class Access:
    """A verified capability. Only :meth:`Store.authenticate` issues a usable one.

    The issuing store seals each Access with an HMAC over its fields under a key that exists
    only in that store's memory; :meth:`Store.read` refuses any Access whose seal does not match,
    so one built by hand or widened with ``dataclasses.replace`` (which drops the seal) reads
    nothing.
    """

    holder_id: bytes
    session_id: bytes
    all_sessions: bool
    namespaces: frozenset[str] | None
    grant_id: bytes | None
    consumer: str | None
    mode: str | None
    expires_at: int
    token_id: bytes
    _seal: bytes = field(init=False, repr=False, compare=False, default=b"")


class Store(GroupCommit, PublicLog):
    """The storage, the log, the keyring and the projections of one data directory."""

    def __init__(
        self,
        config: Config,
        *,
        clock: Callable[[], float] = time.time,
        fault_hook: FaultHook | None = None,
        checkpointer: bool = True,
        check_applied: bool = True,
        embedder: Embedder | None = None,
    ) -> None:
        """Open the store of ``config``; unless ``check_applied`` is False (``saihm rebuild``
        only), refuse with :class:`StaleProjections` when the projections do not reflect the
        whole log (saihm-protocol "Order of effect and receipt")."""
        self.config = config
        self.clock = clock
        self._fault = fault_hook or (lambda step: None)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.kek_dir = KekDirectory(config.kek_dir)
        if config.store is None:
            refuse_migrated(config.data_dir)  # its store is in PostgreSQL: never an empty LMDB
        self.storage: Storage = open_storage(
            config.storage_location,
            STORAGE_NAMES,
            map_size=config.map_size,
            map_size_max=config.map_size_max,
        )
        if config.store is not None:
            record_store_elsewhere(config.data_dir, config.store)
        self.tree = TreeStorage(self.storage)
        self.keyring = Keyring(self.storage, self.kek_dir)
        self._memo_key = self.kek_dir.memo_key()
        self.record_seal = RecordSeal(derive_record_key(self._memo_key))
        self.projections = Projections(self.storage, self.record_seal)
        self._db: dict[bytes, Namespace] = {name: self.storage.namespace(name) for name in OWN_DBS}
        if check_applied:
            try:
                self._check_applied()
            except StaleProjections:
                self.storage.close()
                raise
        self._access_key = secrets.token_bytes(32)
        self.log_keys = LogKeys.load(config.log_keys_dir)
        #: The log's identity, fixed when the data directory was created (saihm/origin.py).
        self.origin = settle_origin(config.data_dir, config.origin, self.log_keys.origin)
        if not config.verifier_keys_file.exists():
            # Public, and needed by offline tools wherever the signing keys are kept.
            keys = "".join(k + "\n" for k in self.log_keys.verifier_keys())
            config.verifier_keys_file.write_text(keys)
        self.authority_public_key = config.authority_public_key_file.read_bytes()
        self._holder_keys: dict[bytes, HolderKey] = {}
        self._token_cache: dict[bytes, Capability] = {}
        if embedder is None and config.embedding_model is not None:
            embedder = load_embedder(config.embedding_model)
        # Verified cells and the retrieval index: memory only (saihm/cellcache.py).
        self._cache = CellCache(config.recall_cache_mb << 20, embedder)
        self._cache.bind(self.projections)
        self._cv = threading.Condition()
        self._queue: list[Change] = []
        self._committing = False
        self._last_checkpoint = 0.0
        self.jobs = JobBoard(self.clock, JOBS)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if checkpointer:
            self._thread = threading.Thread(target=self._checkpoint_loop, daemon=True)
            self._thread.start()

    def _check_applied(self) -> None:
        """Refuse to serve projections that do not reflect the whole log, or of another format.

        Raises :class:`StaleProjections` naming ``saihm rebuild --replace``. A fresh store
        (empty log, no projections) passes.
        """
        with self.storage.read() as txn:
            size = self.tree.size(txn)
            state = self.projections.state(txn)
        state.require_current(size)

    @staticmethod
    def initialise(config: Config, authority_public_key: bytes) -> None:
        """Create a data directory's log keys and pin the authority key (first run only)."""
        config.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not config.log_keys_dir.exists():
            generate_log_keys(recorded_origin(config.data_dir) or config.origin).save(
                config.log_keys_dir
            )
        record_origin(config.data_dir, LogKeys.load(config.log_keys_dir).origin)
        if not config.authority_public_key_file.exists():
            config.authority_public_key_file.write_bytes(authority_public_key)
        KekDirectory(config.kek_dir)

    def close(self) -> None:
        """Sign a final checkpoint if the log grew, stop the checkpointer, close the storage.

        A failing final checkpoint is logged and recorded (:meth:`job_health`), not raised:
        what was committed stays committed, and the next open's checkpoint covers it.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.jobs.run(CHECKPOINT_JOB, self.checkpoint_now, self.config.checkpoint_interval)
        finally:
            self.storage.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- checkpoints ----------------------------------------------------------------------

    def checkpoint_now(self) -> bytes:
        """Sign a checkpoint for the current size if none exists yet; return the latest note.

        Nodes sharing a store may sign the same size at once: the first note stored wins and
        both return it (docs/scaling.md "Several nodes, one log")."""
        with self.storage.read() as txn:
            size = self.tree.size(txn)
            latest = self._latest_checkpoint(txn)
            if latest is not None and latest[0] >= size:
                return latest[1]
            root = self.tree.root(txn, size)
        stamp = int(self.clock())
        note = self.log_keys.sign(Checkpoint(self.origin, size, root), timestamp=stamp)
        with self.storage.write() as txn:
            if not txn.put(u64(size), note, db=self._db[CHECKPOINTS], overwrite=False):
                # Another process or node signed this size first: the stored note is the one
                # every reader sees, so it is the one returned (and published).
                note = txn.get(u64(size), db=self._db[CHECKPOINTS]) or note
            self._fault("checkpoint")
        self._last_checkpoint = self.clock()
        return note

    def add_cosignatures(self, size: int, lines: Sequence[bytes]) -> bytes:
        """Append witness cosignature lines (c2sp.org/tlog-cosignature) to the stored
        checkpoint of ``size`` and return the note; lines of keys it carries are skipped.

        The caller has verified them (saihm/witness/submit.py). Raises ``NotFound`` if no
        checkpoint of that size is stored, ``NoteError`` for a malformed line.
        """
        with self.storage.write() as txn:
            note = txn.get(u64(size), db=self._db[CHECKPOINTS])
            if note is None:
                raise NotFound("no checkpoint of that size")
            merged = append_cosignatures(bytes(note), lines)
            if merged != note:
                txn.put(u64(size), merged, db=self._db[CHECKPOINTS])
        return merged

    def _checkpoint_loop(self) -> None:
        """The background jobs. Each survives every exception, backs off and records its last
        success (:meth:`job_health`); a failing one never stops the other."""
        interval = self.config.checkpoint_interval
        while not self._stop.wait(interval):
            self.jobs.run(CHECKPOINT_JOB, self.checkpoint_now, interval)
            self.jobs.run(KEK_JOB, self.rotate_kek_if_due, interval)

    def job_health(self) -> dict[str, dict[str, object]]:
        """Each background job's ``last_success`` and ``last_failure`` (UNIX seconds on the
        store's clock, or None), ``last_error`` (a protocol code or errno name such as
        ``ENOSPC``, never a message) and ``consecutive_failures``.

        Jobs: ``checkpoint`` (the loop's and the post-commit checkpoint) and ``kek_rotation``
        (the schedule's check; a success is a check that rotated or found nothing due, or saw
        another process rotating). For ``/healthz`` and ``saihm_status`` extensions.
        """
        return self.jobs.snapshot()

    def rotate_kek_if_due(self, now: float | None = None) -> int | None:
        """Rotate the KEK when the generation in force is older than ``kek_rotation_hours``.

        This is the schedule that bounds when an erasure becomes cryptographically complete
        (docs/formats.md §4). The age is read from the KEK directory, so every worker and every
        restart agrees on it; 0 hours disables the schedule; ``now`` defaults to the store's
        clock. It is also due while a generation older than the one in force is still live (an
        interrupted rotation), so that retirement completes at once. Of the processes sharing
        the KEK directory exactly one rotates: the age is checked again under the rotation
        lock, and a process that finds the lock held skips this tick. Returns the new
        generation, or None.
        """
        hours = self.config.kek_rotation_hours
        if hours <= 0:
            return None
        now = self.clock() if now is None else now

        # Also due at once while an older generation is live: a rotation that failed or was
        # killed part-way is completed on the next tick, not a period later; unless the last
        # attempt found keys it could not re-wrap (damaged entries keep their generation
        # live), which a rotation every tick would not mend.
        job = self.jobs.snapshot()[KEK_JOB]
        finish = not (job["consecutive_failures"] and job["last_error"] == KeyringError.code)

        def due() -> bool:
            if finish and len(self.kek_dir.live_versions()) > 1:
                return True
            issued = self.kek_dir.issued_at(self.kek_dir.current_version)
            return now - issued >= hours * 3600

        if not due():
            return None
        try:
            version = self._rotate(wait=0, due=due, issued_at=now)
        except RotationBusy:
            return None
        if version is not None:
            log.info("scheduled KEK rotation: generation %d in force, older ones retired", version)
        return version

    # -- capabilities ---------------------------------------------------------------------

    def authenticate(self, token: str | None) -> Access:
        """Turn a bearer token into an :class:`Access`, or raise :class:`Unauthenticated`.

        The token must carry the authority's signature, be unexpired, name a holder whose KEY
        receipt is in the log, and, if it is a grant, name a GRANT receipt with no UNGRANT.
        """
        if not token:
            raise Unauthenticated("no capability")
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        now = int(self.clock())
        cap = self._token_cache.get(digest)
        if cap is None:
            try:
                cap = Capability.from_token(token)
                verify_capability(cap, self.authority_public_key, now)
            except SaihmError as err:
                raise Unauthenticated("invalid capability") from err
            if len(self._token_cache) > 4096:
                self._token_cache.clear()
            self._token_cache[digest] = cap
        if cap.expires_at <= now:
            raise Unauthenticated("expired capability")
        scope = cap.scope
        records = self.projections
        with self.storage.read() as txn:
            if not records.holders.known(txn, cap.holder_id):
                raise Unauthenticated("unknown holder")
            # A revocation record is honoured even if its MAC fails: it can only refuse.
            for revoked in (cap.token_id, cap.session_id):
                if revoked is not None and records.grants.is_revoked(txn, cap.holder_id, revoked):
                    raise Unauthenticated("session revoked")
            if scope.grant_id is not None:
                grant = records.grants.get(txn, scope.grant_id)
                if grant is None or grant.revoked or grant.holder != cap.holder_id:
                    raise Unauthenticated("grant revoked or unknown")
                if grant.expires_at and grant.expires_at <= now:
                    raise Unauthenticated("grant expired")
        namespaces = None if scope.namespaces is None else frozenset(scope.namespaces)
        access = Access(
            holder_id=cap.holder_id, session_id=cap.session_id,
            all_sessions=scope.sessions == "all", namespaces=namespaces,
            grant_id=scope.grant_id, consumer=scope.consumer, mode=scope.mode,
            expires_at=cap.expires_at, token_id=cap.token_id,
        )  # fmt: skip
        object.__setattr__(access, "_seal", self._access_seal(access))
        return access

    def _access_seal(self, access: Access) -> bytes:
        fields = (
            access.holder_id, access.session_id, access.all_sessions,
            None if access.namespaces is None else sorted(access.namespaces),
            access.grant_id, access.consumer, access.mode, access.expires_at, access.token_id,
        )  # fmt: skip
        return hmac.new(self._access_key, dumps(list(fields)), "sha256").digest()

    def person_access(self, holder_id: bytes, session_id: bytes, ttl: int = 300) -> Access:
        """The session-scoped :class:`Access` of the person acting on their own data directory
        in process (``saihm memory store|forget|accept``), with no token: the same scope a
        session token from the authority gives, for ``ttl`` seconds.

        Raises :class:`Unauthenticated` for a holder with no KEY receipt or a revoked session,
        as :meth:`authenticate` would for that session's token.
        """
        with self.storage.read() as txn:
            if self.projections.get(txn, P.HOLDERS, holder_id) is None:
                raise Unauthenticated("unknown holder")
            subject = P.revocation_subject(holder_id, session_id)
            if txn.get(subject, db=self.projections.db[P.REVOKED]):
                raise Unauthenticated("session revoked")
        access = Access(
            holder_id=holder_id,
            session_id=session_id,
            all_sessions=False,
            namespaces=None,
            grant_id=None,
            consumer=None,
            mode=None,
            expires_at=int(self.clock()) + ttl,
            token_id=secrets.token_bytes(16),
        )
        object.__setattr__(access, "_seal", self._access_seal(access))
        return access

    # -- the checked read path ------------------------------------------------------------

    def session_tag(self, holder_id: bytes, session_id: bytes) -> bytes:
        """The private index key of one holder's session (an untrusted lookup hint)."""
        return hmac.new(self._memo_key, b"session" + holder_id + session_id, "sha256").digest()

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
        page = self.read_page(access, query=query, cell_ids=cell_ids, include_shared=include_shared)
        return page.cells

    def read_page(
        self,
        access: Access,
        *,
        query: str | None = None,
        cell_ids: Iterable[bytes] | None = None,
        include_shared: bool = True,
        namespaces: frozenset[str] | None = None,
        kinds: frozenset[str] | None = None,
        limit: int | None = None,
        start: int | None = None,
    ) -> Page:
        """The checked read path (requirements.txt; docs/internals.md "One read path").

        Candidates are the caller's cells in scope and the covered cells of contracts active
        for it (saihm-protocol "saihm_recall", "Sharing contracts"). A candidate not yet
        verified in this process is skipped if erased, else its cellId and signature are
        verified (saihm-protocol "Cell shape", "Encryption envelope") and it is decrypted; a
        cell that fails is omitted and logged, never served. Every returned item, cached or
        not, is then checked against ``access`` on this call: not in the erasure list, its
        verified owner and decrypted label (session, namespace) in scope, and for another
        holder's cell a contract active for the caller. ``namespaces`` and ``kinds`` only
        narrow. ``query`` is matched and ranked by :mod:`saihm.retrieval` (absent or empty:
        every cell, in log order). ``limit`` and ``start`` (a leaf index to continue after for
        "all cells", else an offset in the ranking) select a window.
        """
        if not hmac.compare_digest(access._seal, self._access_seal(access)):
            raise Unauthenticated("access was not issued by this store")
        now = int(self.clock())
        q = analyse_query(query)

        narrow = None
        if namespaces is not None or kinds is not None:

            def narrow(payload: SealedPayload) -> bool:
                return (namespaces is None or payload.namespace in namespaces) and (
                    kinds is None or payload.kind in kinds
                )

        with (
            self.storage.read() as txn,
            self._cache.reading(txn, self.tree, self.kek_dir.current_version) as view,
        ):
            fast = (
                view.current
                and cell_ids is None
                and access.all_sessions
                and access.namespaces is None
            )
            if fast:
                page = self._read_holder_wide(
                    txn, view, access, q, include_shared, now, narrow, limit, start
                )
                if page is not None:
                    return page
            return self._read_checked(
                txn, view, access, q, cell_ids, include_shared, now, narrow, limit, start
            )

    def _read_checked(
        self,
        txn: ReadTxn,
        view: CacheView,
        access: Access,
        q: Query,
        cell_ids: Iterable[bytes] | None,
        include_shared: bool,
        now: int,
        narrow: Narrow,
        limit: int | None,
        start: int | None,
    ) -> Page:
        """Every candidate checked on this call, then matched and ranked among themselves."""
        erased = view.erased()
        own, shared = self._candidates(txn, access, cell_ids, include_shared, now)
        chosen = {}
        for index, cell_id, sharer in (*own, *shared):
            is_shared = sharer is not None
            entry = view.get(cell_id)
            if entry is None:
                opened = self._open_checked(txn, access, cell_id, sharer, index)
                if opened is None:
                    continue
                entry = view.put(opened)
            elif (
                cell_id in erased
                or not self._label_allows(access, entry.own.cell, entry.own.payload, is_shared)
                or (is_shared and entry.own.cell.holder_id != sharer)
            ):
                continue
            if narrow is None or narrow(entry.own.payload):
                chosen[cell_id] = (entry, is_shared)
        docs = [(k, e.analysis, e.own.index) for k, (e, _s) in chosen.items()]
        qvec = view.query_vector(q)
        similarity = None
        if qvec is not None:

            def similarity(key: object) -> float:
                vector = chosen[key][0].vector
                return -1.0 if vector is None else cosine(qvec, vector)

        ranked = rank(q, docs, similarity=similarity)
        cells: list[OpenedCell] = []
        scores: list[float] = []
        positions: list[int] = []
        first = 0
        if start is not None:
            if q.everything:
                first = next((i for i, r in enumerate(ranked) if r.order > start), len(ranked))
            else:
                first = start
        more = False
        for position in range(first, len(ranked)):
            if limit is not None and len(cells) >= limit:
                more = True
                break
            r = ranked[position]
            entry, is_shared = chosen[r.key]
            cells.append(entry.opened(is_shared))
            scores.append(r.score)
            positions.append(position + 1)
        if q.everything:
            return Page(cells, more)
        return Page(cells, more, scores, positions)

    @staticmethod
    def _all_cells(
        view: CacheView,
        holder: object,
        shared: list,
        erased: set[bytes],
        failed: set[bytes],
        holder_id: bytes,
        narrow: Narrow,
        limit: int | None,
        start: int | None,
    ) -> Page:
        """Every cell of a holder-wide caller in log order, each checked on this call."""
        entries = view.cache._entries
        cells = holder.cells
        if not shared and narrow is None and limit is None and start is None:
            # The common case, kept tight: the holder's own cells in log order, each checked.
            out = [entries[k].own for k in cells if k not in erased and k not in failed]
            return Page([o for o in out if o.cell.holder_id == holder_id], False)
        own = ((i, k, False) for k, i in cells.items() if k not in failed)
        if shared:
            extra = sorted((e.own.index, k, True) for k, e in shared)
            items = heapq.merge(own, extra)
            by_key = dict(shared)
        else:
            items, by_key = own, {}
        out = []
        for index, cell_id, is_shared in items:
            if (start is not None and index <= start) or cell_id in erased:
                continue
            entry = by_key[cell_id] if is_shared else entries[cell_id]
            opened = entry.own
            if not is_shared and opened.cell.holder_id != holder_id:
                continue
            if narrow is not None and not narrow(opened.payload):
                continue
            if limit is not None and len(out) >= limit:
                return Page(out, True)
            out.append(entry.opened(True) if is_shared else opened)
        return Page(out, False)

    def _read_holder_wide(
        self,
        txn: ReadTxn,
        view: CacheView,
        access: Access,
        q: Query,
        include_shared: bool,
        now: int,
        narrow: Narrow,
        limit: int | None,
        start: int | None,
    ) -> Page | None:
        """A caller that sees every cell of its holder, from the in-memory index.

        The index holds exactly the holder's live verified cells, so ranking and statistics
        over it are over what the caller may see; each returned item is still checked on this
        call. None when the cache cannot hold the holder's cells (the caller then takes the
        item-by-item path).
        """
        holder = view.holder(access.holder_id)
        erased = view.erased()
        shared: list[tuple[bytes, object]] = []
        if include_shared and access.consumer is None:
            for cell_id, sharer in sorted(self._covered_cells(txn, access.holder_id, now).items()):
                entry = view.get(cell_id)
                if entry is None:
                    # MAC-checked (saihm/projections/seal.py): a forged record offers nothing.
                    record = self.projections.cells.get(txn, cell_id)
                    if record is None:
                        continue
                    opened = self._open_checked(txn, access, cell_id, sharer, record.index)
                    if opened is None:
                        continue
                    entry = view.put(opened)
                elif (
                    cell_id in erased
                    or not self._label_allows(access, entry.own.cell, entry.own.payload, True)
                    or entry.own.cell.holder_id != sharer
                ):
                    continue
                shared.append((cell_id, entry))
        failed = set()
        for cell_id in list(holder.missing):
            index = holder.cells.get(cell_id) if holder.cells is not None else None
            if index is None:
                holder.missing.discard(cell_id)
                continue
            opened = self._open_checked(txn, access, cell_id, None, index)
            if opened is None:
                failed.add(cell_id)
            else:
                view.put(opened)
        # Every own cell must now be in the cache (the bound may have pushed some out, or
        # dropped the holder's list): if not, this call takes the item-by-item path.
        if (
            holder.cells is None
            or holder.missing - failed
            or view.cache._holders.get(access.holder_id) is not holder
        ):
            return None
        holder_id = access.holder_id
        if q.everything:
            return self._all_cells(
                view, holder, shared, erased, failed, holder_id, narrow, limit, start
            )
        first = start or 0
        need = None
        if limit is not None and view.cache.embedder is None and narrow is None:
            need = first + limit + 1
        ranked = view.rank_holder(holder, q, shared, view.query_vector(q), need)
        shared_ids = {k for k, _e in shared}
        entries = view.cache._entries
        by_key = dict(shared)
        cells: list[OpenedCell] = []
        scores: list[float] = []
        positions: list[int] = []
        for position in range(first, len(ranked)):
            r = ranked[position]
            is_shared = r.key in shared_ids
            entry = by_key[r.key] if is_shared else entries[r.key]
            cell = entry.own.cell
            if cell.cell_id in erased or (narrow is not None and not narrow(entry.own.payload)):
                continue
            if not is_shared and cell.holder_id != holder_id:
                continue
            if limit is not None and len(cells) >= limit:
                return Page(cells, True, scores, positions)
            cells.append(entry.opened(is_shared))
            scores.append(r.score)
            positions.append(position + 1)
        return Page(cells, False, scores, positions)

    def _candidates(
        self,
        txn: ReadTxn,
        access: Access,
        cell_ids: Iterable[bytes] | None,
        include_shared: bool,
        now: int,
    ) -> tuple[list[tuple[int, bytes, bytes | None]], list[tuple[int, bytes, bytes | None]]]:
        """Candidate (index, cellId, sharer) triples: own cells (sharer None) and covered cells
        of other holders (sharer = the contract's holder, checked against the verified cell)."""
        # Every record consulted here is MAC-bound (saihm/projections/seal.py): a forged or
        # edited one reads as absent, so it can only hide a cell, never offer one.
        records = self.projections
        own: list[tuple[int, bytes, bytes | None]] = []
        shared: list[tuple[int, bytes, bytes | None]] = []
        if cell_ids is not None:
            covered: dict[bytes, bytes] | None = None
            for cell_id in cell_ids:
                record = records.cells.get(txn, cell_id)
                if record is None:
                    continue
                if record.owner == access.holder_id:
                    own.append((record.index, cell_id, None))
                    continue
                if not include_shared or access.consumer is not None:
                    continue
                if covered is None:
                    covered = self._covered_cells(txn, access.holder_id, now)
                if cell_id in covered:
                    shared.append((record.index, cell_id, covered[cell_id]))
            return own, shared
        if access.all_sessions:
            listed = records.cells.live_of_holder(txn, access.holder_id)
        else:
            tag = self.session_tag(access.holder_id, access.session_id)
            listed = records.cells.live_of_session(txn, tag)
        for index, cell_id in listed:
            own.append((index, cell_id, None))
        if include_shared and access.consumer is None:
            for cell_id, sharer in sorted(self._covered_cells(txn, access.holder_id, now).items()):
                record = records.cells.get(txn, cell_id)
                if record is not None:
                    shared.append((record.index, cell_id, sharer))
        return own, shared

    def _covered_cells(self, txn: ReadTxn, grantee: bytes, now: int) -> dict[bytes, bytes]:
        """Cells of other holders covered by a contract active for ``grantee``, each with the
        holder of the contract that covers it.

        saihm-protocol "Sharing contracts": a covered cell counts only if the contract's holder
        owns it; a contract cannot expose a third party's cell. The read path checks the
        verified cell's owner against the contract's holder again (:meth:`_label_allows`).
        """
        covered: dict[bytes, bytes] = {}
        for contract in self.projections.contracts.active_for(txn, grantee, now):
            for cell_id in contract.shards:
                record = self.projections.cells.get(txn, cell_id)
                if record is not None and record.owner == contract.holder != grantee:
                    covered[cell_id] = contract.holder
        return covered

    def _open_checked(
        self,
        txn: ReadTxn,
        access: Access,
        cell_id: bytes,
        sharer: bytes | None,
        index: int,
    ) -> OpenedCell | None:
        shared = sharer is not None
        if self.projections.cells.is_erased(txn, cell_id):
            return None
        raw_body = txn.get(cell_id, db=self._db[BODIES])
        if raw_body is None:
            return None
        try:
            body = Body.decode(raw_body)
            memo = txn.get(cell_id, db=self._db[MEMO])
            remembered = memo is not None and hmac.compare_digest(
                memo, self._memo(body.object_cbor)
            )
            cell = Cell.from_cbor(body.object_cbor, authenticated=remembered)
            if cell.cell_id != cell_id:
                raise VerificationFailed("stored cell is filed under another cellId")
            check_cell_id(cell)
            if not remembered:
                holder = self.projections.holders.get(txn, cell.holder_id)
                if holder is None:
                    raise VerificationFailed("cell of a holder with no KEY receipt")
                verify_cell_signature(cell, holder.public_key)
            dek = self.keyring.dek(txn, cell_id)
            payload = decrypt(cell, dek)
        except NotFound:
            return None
        except (SaihmError, ValueError) as err:  # ValueError: a body that is not CBOR
            log.warning("cell %s omitted: %s", cell_id.hex(), type(err).__name__)
            return None
        if not self._label_allows(access, cell, payload, shared):
            return None
        if shared and cell.holder_id != sharer:
            return None
        return OpenedCell(cell=CellHeader.of(cell), payload=payload, shared=shared, index=index)

    @staticmethod
    def _label_allows(
        access: Access, cell: Cell | CellHeader, payload: SealedPayload, shared: bool
    ) -> bool:
        """The per-item check: the verified owner and the decrypted label against the access."""
        if access.namespaces is not None and payload.namespace not in access.namespaces:
            return False
        if shared:
            return access.consumer is None and cell.holder_id != access.holder_id
        if cell.holder_id != access.holder_id:
            return False
        return access.all_sessions or payload.session_id == access.session_id

    def check_opens(self, txn: ReadTxn, cell: Cell) -> None:
        """Raise unless ``cell``'s wrapped DEK unwraps under a live KEK generation and opens
        its ciphertext (saihm-protocol "Encryption envelope"); for ``saihm verify --data``.

        Raises ``NotFound`` (no wrapped DEK), ``KekUnavailable`` or ``VerificationFailed``.
        Nothing decrypted leaves this method.
        """
        decrypt(cell, self.keyring.dek(txn, cell.cell_id))

    def memo_matches(self, txn: ReadTxn, cell_id: bytes, cell_bytes: bytes) -> bool:
        """False when a verified-cell memo is stored for ``cell_id`` and is not the memo of
        ``cell_bytes`` (an absent memo only means the signature is checked on every read)."""
        memo = txn.get(cell_id, db=self._db[MEMO])
        return memo is None or hmac.compare_digest(memo, self._memo(cell_bytes))

    def _memo(self, cell_bytes: bytes) -> bytes:
        return hmac.new(self._memo_key, b"cell" + cell_bytes, "sha256").digest()

    # -- state the operator consults (metadata only, never plaintext) ---------------------

    def holder_key(self, holder_id: bytes) -> HolderKey:
        """The custodied signing key of ``holder_id`` (cached; derived from the wrapped seed)."""
        key = self._holder_keys.get(holder_id)
        if key is None:
            with self.storage.read() as txn:
                seed = self.keyring.seed(txn, holder_id)
            key = HolderKey.from_seed(seed)
            self._holder_keys[holder_id] = key
        return key

    def read_txn(self) -> ReadTxn:
        """A read-only snapshot (use as a context manager)."""
        return self.storage.read()

    def stats_since(self, start: int) -> tuple[int, int]:
        """(calls, calls within the service window) counted since ``start``."""
        calls = ok = 0
        with self.storage.read() as txn:
            for _, value in txn.scan(self._db[STATS], u64(start // 86_400)):
                c, k = loads(value)
                calls += c
                ok += k
        return calls, ok

    def body(self, subject_id: bytes) -> Body | None:
        """The private body stored for a subject (ciphertext and metadata only)."""
        with self.storage.read() as txn:
            raw = txn.get(subject_id, db=self._db[BODIES])
        return None if raw is None else Body.decode(raw)

    # -- maintenance ----------------------------------------------------------------------

    def rotate_kek(self, wait: float | None = None) -> int:
        """Re-wrap every live DEK and seed under a new KEK generation, then retire the old ones.

        Waits up to ``wait`` seconds (None: as long as it takes) for a rotation another process
        is running, then raises ``RotationBusy`` (:meth:`Keyring.rotate`).
        """
        version = self._rotate(wait=wait, due=None, issued_at=self.clock())
        if version is None:  # pragma: no cover - only a ``due`` predicate returns None
            raise KeyringError("rotation did not run")
        return version

    def _rotate(
        self, *, wait: float | None, due: Callable[[], bool] | None, issued_at: float
    ) -> int | None:
        """One rotation; if the map is full for the re-wrap, grow it once and try again."""
        try:
            for attempt in (0, 1):
                try:
                    return self.keyring.rotate(
                        wait=wait, due=due, issued_at=issued_at, hook=self._rotation_step
                    )
                except StorageFull:
                    if attempt or not self.storage.grow():
                        raise Unavailable("storage full: the KEK re-wrap did not fit") from None
                    due = None  # the first attempt issued a generation: finish it regardless
            return None  # pragma: no cover
        finally:
            # The cache of verified cells is emptied whenever a rotation ran or was tried
            # (docs/retrieval.md); the next reads check every cell again.
            self._cache.clear()

    def _rotation_step(self, step: str) -> None:
        self._fault("rotate." + step)

    def _on_commit(self) -> None:
        """Bring the cache in step with the log before the batch is acknowledged.

        Work after a commit never turns it into an error: if the sync fails, the cache is
        emptied instead, which is always safe.
        """
        try:
            with self.storage.read() as txn, self._cache.lock:
                self._cache.sync(txn, self.tree, self.kek_dir.current_version)
        except Exception as err:  # a committed change must still be acknowledged
            log.error("cache sync after commit failed (%s); cache emptied", type(err).__name__)
            self._cache.clear()

    def rebuild_into(
        self,
        target: Path,
        progress: Callable[[int], None] | None = None,
        compare: Callable[[Projections, ReadTxn, Projections, ReadTxn], object] | None = None,
    ) -> dict:
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
            fresh = Projections(scratch, self.record_seal)
            started = time.perf_counter()
            with self.storage.read() as live_txn:
                size = self.tree.size(live_txn)
                self.rebuild_from(live_txn, fresh, size, progress)
                seconds = time.perf_counter() - started
                with scratch.read() as fresh_txn:
                    difference = P.first_difference(self.projections, live_txn, fresh, fresh_txn)
                    if compare is not None:
                        compared = compare(self.projections, live_txn, fresh, fresh_txn)
        finally:
            scratch.close()
        return {
            "events": size,
            "seconds": seconds,
            "identical": difference is None,
            "difference": difference,
            **({"compared": compared} if compare is not None else {}),
        }

    def replace_projections(
        self, target: Path, progress: Callable[[int], None] | None = None
    ) -> dict:
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
            fresh = Projections(scratch, self.record_seal)
            started = time.perf_counter()
            with self.storage.read() as live_txn:
                size = self.tree.size(live_txn)
                self.rebuild_from(live_txn, fresh, size, progress)
            replaced = 0
            with self.storage.write() as txn, scratch.read() as fresh_txn:
                for name in Projections.DB_NAMES:
                    db = self.projections.db[name]
                    txn.clear(db)
                    pairs = fresh_txn.scan(fresh.db[name])
                    while chunk := list(islice(pairs, _COPY_CHUNK)):
                        txn.put_many(chunk, db=db, append=True)
                        replaced += len(chunk)
                grown = self.tree.size(txn)
                self.rebuild_from(txn, self.projections, grown, None, start=size, live=txn)
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
        usage = self.storage.usage()
        size = max(self.config.map_size, usage.capacity or 0, 2 * usage.used)
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
        bodies = self._db[BODIES]
        chunk = 16384
        for first in range(start, size, chunk):
            leaves = self.tree.leaves(live_txn, first, min(size, first + chunk))
            txn = live if live is not None else into.storage.write()
            try:
                for offset, leaf in enumerate(leaves):
                    try:
                        view = LeafView.from_leaf(leaf)
                        body = None
                        if view.operation in _BODY_OPERATIONS:
                            raw = live_txn.get(view.subject_id, db=bodies)
                            body = None if raw is None else Body.decode(raw)
                        into.apply(txn, first + offset, view, body, record_applied=False)
                    except (
                        RecordError,
                        ValueError,
                        KeyError,
                        TypeError,
                        IndexError,
                        AttributeError,
                    ) as err:
                        # A damaged leaf or body (the public check names a damaged leaf).
                        what = f"leaf {first + offset} cannot be applied: {type(err).__name__}"
                        raise RebuildFailed(what) from err
                into.mark_applied(txn, first + len(leaves))
            except BaseException:
                if live is None:
                    txn.abort()
                raise
            if live is None:
                txn.commit()
            if progress is not None:
                progress(len(leaves))

    # -- pending provider proposals -------------------------------------------------------
    # Owned by saihm/provider (RFC 0007 "never silent agent write"). A consumer's write
    # proposal is kept as a prepared cell: sealed, signed, its DEK wrapped in the keyring beside
    # every other DEK (so KEK rotation re-wraps it) and its cell bytes in a pending database.
    # Nothing here is plaintext. Accepting commits the cell with a REMEMBER receipt; rejecting
    # deletes the entry and destroys the wrapped DEK. Pending cells are in no projection, so the
    # checked read path never offers them.

    def _pending(self) -> Namespace:
        return self._db[PENDING]

    def pending_put(
        self,
        proposal_id: bytes,
        cell: Cell,
        dek: bytes,
        meta: bytes,
        admit: Callable[[list[tuple[bytes, bytes]]], Iterable[bytes]] | None = None,
    ) -> None:
        """Hold a prepared cell and its DEK (wrapped under the current KEK) for confirmation.

        ``admit``, when given, is called inside the write transaction (so across processes no
        other proposal lands in between) with every held ``(proposalId, meta)``; it returns
        the proposals to drop first (their DEKs destroyed) or raises to refuse this one, which
        then changes nothing.
        """
        db = self._pending()
        with self.storage.write() as txn:
            if admit is not None:
                held = [(bytes(k), loads(v)[2]) for k, v in txn.scan(db)]
                for dropped in admit(held):
                    raw = txn.get(dropped, db=db)
                    if raw is not None:
                        self.keyring.destroy(txn, Cell.from_cbor(loads(raw)[1]).cell_id)
                        txn.delete(dropped, db=db)
            self.keyring.put_dek(txn, cell.cell_id, dek)
            if not txn.put(proposal_id, dumps({1: cell.to_cbor(), 2: meta}), db=db,
                           overwrite=False):  # fmt: skip
                raise Conflict("proposal id already in use")

    def pending_items(self) -> list[tuple[bytes, Cell, bytes]]:
        """Every held proposal: (proposalId, prepared cell, meta), by proposalId."""
        db = self._pending()
        with self.storage.read() as txn:
            return [
                (bytes(key), Cell.from_cbor(loads(value)[1]), loads(value)[2])
                for key, value in txn.scan(db)
            ]

    def pending_open(self, proposal_id: bytes) -> tuple[Cell, bytes, SealedPayload]:
        """One held proposal, its cellId and signature checked, decrypted for the person.

        Raises :class:`NotFound` if no such proposal is held.
        """
        db = self._pending()
        with self.storage.read() as txn:
            raw = txn.get(proposal_id, db=db)
            if raw is None:
                raise NotFound("no such pending proposal", code="proposal_not_found")
            entry = loads(raw)
            cell = Cell.from_cbor(entry[1])
            check_cell_id(cell)
            holder = self.projections.holders.get(txn, cell.holder_id)
            if holder is None:
                raise VerificationFailed("proposal of a holder with no KEY receipt")
            verify_cell_signature(cell, holder.public_key)
            payload = decrypt(cell, self.keyring.dek(txn, cell.cell_id))
        return cell, entry[2], payload

    def pending_take_guard(self, proposal_id: bytes) -> Callable[[WriteTxn], object]:
        """A :class:`Change` guard that removes the proposal inside the commit's transaction.

        The cell then becomes live in the same transaction that logs its REMEMBER receipt, or
        neither happens; a proposal already taken or rejected refuses the change (NotFound).
        """
        db = self._pending()

        def guard(txn: WriteTxn) -> object:
            if not txn.delete(proposal_id, db=db):
                raise NotFound("no such pending proposal", code="proposal_not_found")
            return None

        return guard

    def pending_reject(self, proposal_id: bytes) -> bool:
        """Drop a proposal and destroy its wrapped DEK; False if it was not held."""
        db = self._pending()
        with self.storage.write() as txn:
            raw = txn.get(proposal_id, db=db)
            if raw is None:
                return False
            cell = Cell.from_cbor(loads(raw)[1])
            self.keyring.destroy(txn, cell.cell_id)
            txn.delete(proposal_id, db=db)
        return True
