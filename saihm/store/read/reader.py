"""The checked read path: the only code outside ``saihm.events`` that produces plaintext.

requirements.txt: "Everything that reads the store passes that filter, including the code that
runs the agent". Every read of a cell, and the opening of a pending provider proposal, takes an
:class:`~saihm.store.auth.Access` issued by the store's
:class:`~saihm.store.auth.Authenticator` and is checked against it after the cell is verified
(saihm-protocol "Cell shape", "Encryption envelope") and its sealed label decrypted.
tests/store/test_single_read_path.py pins that no other module decrypts or unwraps a DEK.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Hashable, Sequence
from typing import cast

from saihm.errors import NotFound, SaihmError, VerificationFailed
from saihm.events import Cell, SealedPayload
from saihm.events.envelope import check_cell_id, decrypt, verify_cell_signature
from saihm.projections import Body, LeafView
from saihm.retrieval import Embedder
from saihm.retrieval.holder import rank_visible
from saihm.storage import ReadTxn
from saihm.store.auth import Access, Authenticator
from saihm.store.environment import BODIES, MEMO, Environment
from saihm.store.read.cache import CacheEntry, CacheView, CellCache, context_item
from saihm.store.read.candidates import candidates, label_allows
from saihm.store.read.holderwide import ReadRequest, read_holder_wide, still_allowed
from saihm.store.read.views import CellHeader, OpenedCell, Page

log = logging.getLogger("saihm.store")

#: A holder-wide read with the semantic stage embeds its holder's cells ahead, outside the
#: cache's lock, once at least this many lack a vector (a fresh process, before the warm-up
#: reaches them); fewer are embedded within the read, as before.
AHEAD_MIN = 32
#: Cells opened under the lock, then embedded outside it in one model call, per step ahead.
AHEAD_STEP = 256
#: The step ahead stops once the cache holds this fraction of its budget (as the warm-up's:
#: it never evicts to embed).
AHEAD_FILL = 0.9


class CheckedReader:
    """Reads cells for an :class:`Access`, each item checked on every call; owns the recall
    cache of verified cells (saihm/store/read/cache.py, memory only)."""

    def __init__(
        self, env: Environment, authenticator: Authenticator, embedder: Embedder | None
    ) -> None:
        self.env = env
        self.authenticator = authenticator
        self.cache = CellCache(env.config.recall_cache_mb << 20, embedder)
        self.cache.bind(env.projections)

    def read_page(self, request: ReadRequest) -> Page:
        """The checked read path (requirements.txt; docs/internals.md "One read path").

        Candidates are the caller's cells in scope and the covered cells of contracts active
        for it (saihm-protocol "saihm_recall", "Sharing contracts"). A candidate not yet
        verified in this process is skipped if erased, else its cellId and signature are
        verified (saihm-protocol "Cell shape", "Encryption envelope") and it is decrypted; a
        cell that fails is omitted and logged, never served. Every returned item, cached or
        not, is then checked against ``access`` on this call: not in the erasure list, its
        verified owner and decrypted label (session, namespace) in scope, and for another
        holder's cell a contract active for the caller. The window's namespaces and kinds only
        narrow. The query is matched and ranked by :mod:`saihm.retrieval` (absent or empty:
        every cell, in log order). The window's ``limit`` and ``start`` (a leaf index to
        continue after for "all cells", else an offset in the ranking) select a window.
        """
        access, cell_ids = request.access, request.cell_ids
        self.authenticator.require(access)
        env = self.env
        now = int(env.clock())
        holder_wide = cell_ids is None and access.all_sessions and access.namespaces is None
        if holder_wide and not request.q.everything:
            self.embed_ahead(access.holder_id)
        with (
            env.storage.read() as txn,
            self.cache.reading(txn, env.tree, env.kek_dir.current_version) as view,
        ):
            if view.current and holder_wide:
                page = read_holder_wide(self.open_checked, env.projections, txn, view, request, now)
                if page is not None:
                    return page
            return self._read_checked(txn, view, request, now)

    def _read_checked(self, txn: ReadTxn, view: CacheView, request: ReadRequest, now: int) -> Page:
        """Every candidate checked on this call, then matched and ranked among themselves."""
        access, q, narrow = request.access, request.q, request.narrow
        limit, start = request.limit, request.start
        erased = view.erased()
        own, shared = candidates(
            self.env, txn, access, request.cell_ids, request.include_shared, now
        )
        visible = {}
        for index, cell_id, sharer in (*own, *shared):
            is_shared = sharer is not None
            entry = view.get(cell_id)
            if entry is None:
                opened = self.open_checked(txn, access, cell_id, sharer, index)
                if opened is None:
                    continue
                # Embedded below with the others, in batches, if the query needs it.
                entry = view.put(opened, embed=False)
            elif not still_allowed(entry, erased, access, sharer):
                continue
            visible[cell_id] = (entry, is_shared)
        # ``narrow`` only filters what is returned: a query is ranked over everything visible,
        # as on the holder-wide path, so both give the same answer.
        chosen = {k: v for k, v in visible.items() if narrow is None or narrow(v[0].own.payload)}
        # Every item is one the caller may see on this call: a cell's neighbours are drawn
        # from these only (another holder's shared cell has none).
        items = [
            context_item(k, e, s) for k, (e, s) in (chosen if q.everything else visible).items()
        ]
        qvec = view.query_vector(q)
        have: list[tuple[Hashable, Sequence[float], int]] = []
        if qvec is not None:
            # The semantic stage: every visible cell's cosine (a cell without a vector has none).
            view.embed_entries([(k, e) for k, (e, _s) in visible.items()])
            have = [
                (k, e.vector, e.own.index) for k, (e, _s) in visible.items() if e.vector is not None
            ]
        ranked = rank_visible(q, items, qvec, have)
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
            r = ranked[position]
            key = cast(bytes, r.key)  # the keys ranked are cellIds
            if key not in chosen:
                continue
            if limit is not None and len(cells) >= limit:
                more = True
                break
            entry, is_shared = chosen[key]
            cells.append(entry.opened(is_shared))
            scores.append(r.score)
            positions.append(position + 1)
        if q.everything:
            return Page(cells, more)
        return Page(cells, more, scores, positions)

    def open_checked(
        self,
        txn: ReadTxn,
        access: Access,
        cell_id: bytes,
        sharer: bytes | None,
        index: int,
    ) -> OpenedCell | None:
        """One stored cell verified, decrypted and checked against ``access``; None (logged
        if damaged) when it is erased, missing, fails verification or is out of scope."""
        shared = sharer is not None
        opened = self._open_verified(txn, cell_id, index)
        if opened is None:
            return None
        cell, payload = opened.cell, opened.payload
        if not label_allows(access, cell, payload, shared):
            return None
        if shared and cell.holder_id != sharer:
            return None
        if shared:
            return OpenedCell(cell=cell, payload=payload, shared=True, index=index)
        return opened

    def embed_ahead(self, holder_id: bytes) -> None:
        """Before a holder-wide read with the semantic stage: embed the holder's cells that
        lack a vector outside the cache's lock, oldest first (the warm-up goes newest
        first), when there are at least :data:`AHEAD_MIN`. A fresh process's first recall
        then holds the lock only to open cells, and other reads go on meanwhile; the read
        itself still embeds whatever is left. Nothing here decides access."""
        cache = self.cache
        if cache.embedder is None or not cache.enabled:
            return
        with cache.lock:
            holder = cache.holder_index(holder_id)
            if holder is not None and holder.cells is not None:
                if not holder.missing and not cache.unembedded:
                    return  # the common, warm case: every cell cached with its vector
                cells = self._lacking_vectors(holder.cells, holder.missing)
            else:
                cells = None
        if cells is None:
            env = self.env
            with (
                env.storage.read() as txn,
                cache.reading(txn, env.tree, env.kek_dir.current_version) as view,
            ):
                if not view.current:
                    return
                holder = view.holder(holder_id)
                if holder.cells is None:
                    return
                cells = self._lacking_vectors(holder.cells, holder.missing)
        if len(cells) < AHEAD_MIN:
            return
        cells.sort(key=lambda c: c[1])
        for at in range(0, len(cells), AHEAD_STEP):
            if self.embed_outside_lock(cells[at : at + AHEAD_STEP], AHEAD_FILL):
                return

    def _lacking_vectors(
        self, cells: dict[bytes, int], missing: set[bytes]
    ) -> list[tuple[bytes, int]]:
        """(cellId, leaf index) of ``cells`` not cached or cached without a vector. The
        caller holds the cache's lock."""
        entries = self.cache.entries
        out = []
        for cell_id, index in cells.items():
            if cell_id in missing:
                out.append((cell_id, index))
            else:
                entry = entries.get(cell_id)
                if entry is None or entry.vector is None:
                    out.append((cell_id, index))
        return out

    def embed_outside_lock(self, cells: Sequence[tuple[bytes, int]], fill: float | None) -> bool:
        """Cache the ``cells`` (cellId, leaf index) not cached (opened under the cache's lock,
        in a current snapshot: :meth:`cache_unembedded`), then embed those without a vector
        outside the lock, in one model call, and fill the ones still cached; True when the
        cache reached ``fill`` of its budget first (None: no limit). For the embedding worker
        and :meth:`embed_ahead`."""
        cache = self.cache
        embedder = cache.embedder
        if embedder is None or not cache.enabled:
            return True
        todo, full = self.cache_unembedded(cells, fill)
        if todo:
            vectors = embedder.embed([e.own.payload.content for _k, e in todo])
            with cache.lock:
                for (cell_id, entry), vector in zip(todo, vectors, strict=True):
                    cache.fill(cell_id, entry, vector)
            cache.trim()
        return full

    def cache_unembedded(
        self, cells: Sequence[tuple[bytes, int]], fill: float | None = None
    ) -> tuple[list[tuple[bytes, CacheEntry]], bool]:
        """For the cache's embedding worker (saihm/store/read/warm.py): put the ``cells`` (cellId,
        leaf index) not cached yet in the cache, verified and decrypted exactly as a read
        would, without a vector; return the cached entries among them that have none, and
        whether the cache reached ``fill`` (a fraction of its bound; None: no limit) first.
        Nothing is handed to any caller: every read checks each item again. Empty when the
        cache moved past this snapshot meanwhile."""
        env, cache = self.env, self.cache
        todo: list[tuple[bytes, CacheEntry]] = []
        with (
            env.storage.read() as txn,
            cache.reading(txn, env.tree, env.kek_dir.current_version) as view,
        ):
            if not view.current:
                return todo, False
            for cell_id, index in cells:
                entry = cache.entries.get(cell_id)
                if entry is None:
                    if fill is not None and cache.used_bytes >= fill * cache.max_bytes:
                        return todo, True
                    opened = self._open_verified(txn, cell_id, index)
                    if opened is None:
                        continue
                    entry = view.put(opened, embed=False)
                if entry.vector is None:
                    todo.append((cell_id, entry))
        return todo, False

    def _open_verified(self, txn: ReadTxn, cell_id: bytes, index: int) -> OpenedCell | None:
        """One stored cell verified and decrypted as its holder's own, for no caller yet;
        None (logged if damaged) when it is erased, missing or fails verification."""
        env = self.env
        if env.projections.cells.is_erased(txn, cell_id):
            return None
        raw_body = txn.get(cell_id, db=env.db[BODIES])
        if raw_body is None:
            return None
        try:
            body = Body.decode(raw_body)
            memo = txn.get(cell_id, db=env.db[MEMO])
            remembered = memo is not None and hmac.compare_digest(memo, env.memo(body.object_cbor))
            cell = Cell.from_cbor(body.object_cbor, authenticated=remembered)
            if cell.cell_id != cell_id:
                raise VerificationFailed("stored cell is filed under another cellId")
            check_cell_id(cell)
            if not remembered:
                self._verify_signature(txn, cell)
            payload = decrypt(cell, env.keyring.dek(txn, cell_id))
        except NotFound:
            return None
        except (SaihmError, ValueError) as err:  # ValueError: a body that is not CBOR
            log.warning("cell %s omitted: %s", cell_id.hex(), type(err).__name__)
            return None
        return OpenedCell(cell=CellHeader.of(cell), payload=payload, shared=False, index=index)

    def open_prepared(self, txn: ReadTxn, access: Access, cell: Cell) -> SealedPayload | None:
        """The label and content of a prepared cell held outside the log (a pending provider
        proposal, RFC 0007 "never silent agent write"), for ``access``.

        Raises :class:`~saihm.errors.Unauthenticated` for an Access this store did not issue,
        and :class:`VerificationFailed` (or ``NotFound`` for a destroyed DEK) when the cellId or
        the holder's signature does not check. None when the cell is not ``access``'s own, in
        its session and namespaces (nothing is returned out of scope).
        """
        self.authenticator.require(access)
        check_cell_id(cell)
        self._verify_signature(txn, cell)
        payload = decrypt(cell, self.env.keyring.dek(txn, cell.cell_id))
        if not label_allows(access, cell, payload, False):
            return None
        return payload

    def _verify_signature(self, txn: ReadTxn, cell: Cell) -> None:
        holder = self.env.projections.holders.get(txn, cell.holder_id)
        if holder is None:
            raise VerificationFailed("cell of a holder with no KEY receipt")
        verify_cell_signature(cell, holder.public_key)

    def check_opens(self, txn: ReadTxn, cell: Cell) -> None:
        """Raise unless ``cell``'s wrapped DEK unwraps under a live KEK generation and opens
        its ciphertext (saihm-protocol "Encryption envelope"); for ``saihm verify --data``.

        Raises ``NotFound`` (no wrapped DEK), ``KekUnavailable`` or ``VerificationFailed``.
        Nothing decrypted leaves this method.
        """
        decrypt(cell, self.env.keyring.dek(txn, cell.cell_id))

    def memo_matches(self, txn: ReadTxn, cell_id: bytes, cell_bytes: bytes) -> bool:
        """False when a verified-cell memo is stored for ``cell_id`` and is not the memo of
        ``cell_bytes`` (an absent memo only means the signature is checked on every read)."""
        memo = txn.get(cell_id, db=self.env.db[MEMO])
        return memo is None or hmac.compare_digest(memo, self.env.memo(cell_bytes))

    def sync_cache(self, appended: tuple[int, Sequence[LeafView]] | None = None) -> None:
        """Bring the cache in step with the log before a committed batch is acknowledged.

        ``appended`` is the batch's first leaf index and its leaves' public fields
        (``GroupCommit.appended``): when they are the next leaves the cache needs, it takes
        them as they are (``CellCache.follow``), with no read of the storage; otherwise it
        reads what the log holds beyond its last sync.

        Work after a commit never turns it into an error: if the sync fails, the cache is
        emptied instead, which is always safe.
        """
        env = self.env
        try:
            if appended is not None:
                with self.cache.lock:
                    if self.cache.follow(*appended, env.kek_dir.current_version):
                        return
            with env.storage.read() as txn, self.cache.lock:
                self.cache.sync(txn, env.tree, env.kek_dir.current_version)
        except Exception as err:  # a committed change must still be acknowledged
            log.error("cache sync after commit failed (%s); cache emptied", type(err).__name__)
            self.cache.clear()
