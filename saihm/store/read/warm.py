"""Embedding off the request path (docs/retrieval.md "The cache", issue 23): one background
worker that gives cached cells their semantic-stage vectors before a recall needs them.

It does two things, in this order of priority: the cells written to the log since it last
looked (this process's commits, and any other's the cache synced) are opened and embedded
soon after the commit, without holding the committer; and, once :meth:`Warmer.warm_up` asks
(``saihm serve``, through :meth:`saihm.store.Store.start_jobs`), the live cells newest first,
until the cache's budget is nearly used (it never evicts to warm). Each step opens a small
batch under the cache's lock in a current snapshot, exactly as a read would (verified,
decrypted, erased cells skipped: :meth:`CheckedReader.cache_unembedded`), puts it in the cache
without a vector, releases the lock, embeds the batch in one model call, then fills the
vectors of the entries still cached. Nothing here decides access (every read checks each item
again) and nothing reaches the disk: vectors live beside the cached plaintext only.

Correctness never depends on the worker: a recall that finds a cached cell without a vector
embeds it itself (:meth:`saihm.store.read.cache.CacheView.embed_missing`,
:meth:`~saihm.store.read.cache.CacheView.embed_entries`), and a holder-wide read with many cells
to embed does it outside the lock first (:meth:`CheckedReader.embed_ahead`). :meth:`Warmer.stop`
(from :meth:`saihm.store.Store.close`) ends the thread before the storage closes; a stop or a
kill mid-step loses nothing, since the worker writes nothing but the in-memory cache.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from saihm.events.operations import BY_NAME, Effect
from saihm.projections import LeafView
from saihm.store.read.cache import CellCache
from saihm.store.read.reader import CheckedReader

__all__ = ["WARM_FILL", "Warmer"]

log = logging.getLogger("saihm.store")

#: Cells opened, then embedded in one model call, per step (the lock is held to open them).
STEP = 32
#: Log leaves read per warm-up step, newest first.
LEAVES = 512
#: The warm-up stops once the cache holds this fraction of its budget (it never evicts).
WARM_FILL = 0.9
_WRITES = frozenset(name for name, spec in BY_NAME.items() if spec.effect is Effect.WRITES_CELL)


class Warmer:
    """The embedding worker of one store's cache (see the module docstring). The thread
    starts on the first :meth:`wake` or :meth:`warm_up` and ends on :meth:`stop`."""

    def __init__(self, reader: CheckedReader) -> None:
        self.reader = reader
        self.cache: CellCache = reader.cache
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._woken = False
        #: The next leaf index (exclusive) the warm-up reads back from; None: no warm-up.
        self._warm_at: int | None = None
        #: Set whenever the worker has nothing left to do (tests wait on it, bounded).
        self.drained = threading.Event()
        self.drained.set()
        # Follow the log from now, so the first commit's cells are seen (cache.sync).
        reader.sync_cache()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        """After a commit: embed the cells it wrote, soon, on the worker."""
        with self._cond:
            if self._stopping:
                return
            self._woken = True
            self.drained.clear()
            self._start()
            self._cond.notify()

    def warm_up(self) -> None:
        """Start embedding the live cells, newest first, within the cache's budget."""
        with self._cond:
            if self._stopping or not self.cache.enabled:
                return
            env = self.reader.env
            with env.storage.read() as txn:
                self._warm_at = env.tree.size(txn)
            self.drained.clear()
            self._start()
            self._cond.notify()

    def stop(self, timeout: float | None = None) -> None:
        """End the worker (after the step it is in) and wait for it."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="saihm-embed", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._stopping or self._woken or self._warm_at is not None):
                    self.drained.set()
                    self._cond.wait()
                if self._stopping:
                    self.drained.set()
                    return
                self._woken = False
            try:
                with self.cache.lock:
                    written = self.cache.take_written()
                for at in range(0, len(written), STEP):
                    if self._stopping:
                        break
                    self._embed(written[at : at + STEP], warm=False)
                if not written and self._warm_at is not None:
                    self._warm_step()  # lowest priority: only when no new cell waits
            except Exception as err:  # the worker never takes the store down
                log.error("embedding worker step failed (%s)", type(err).__name__)
                with self._cond:
                    self._warm_at = None

    def _warm_step(self) -> None:
        """Read the next leaves back from the warm-up's position and embed their cells."""
        end = self._warm_at
        assert end is not None
        start = max(0, end - LEAVES)
        env = self.reader.env
        with env.storage.read() as txn:
            leaves = [
                (start + i, LeafView.from_leaf(leaf))
                for i, leaf in enumerate(env.tree.leaves(txn, start, end))
            ]
        cells = [(v.subject_id, i) for i, v in reversed(leaves) if v.operation in _WRITES]
        full = False
        for at in range(0, len(cells), STEP):
            if self._stopping or self._woken:
                # A commit's cells go first: come back to this chunk afterwards.
                return
            full = self._embed(cells[at : at + STEP], warm=True)
            if full:
                break
        with self._cond:
            self._warm_at = None if full or start == 0 else start

    def _embed(self, cells: Sequence[tuple[bytes, int]], *, warm: bool) -> bool:
        """Cache the ``cells`` not cached and embed them outside the cache's lock
        (:meth:`CheckedReader.embed_outside_lock`); True when the warm-up reached the budget."""
        return self.reader.embed_outside_lock(cells, WARM_FILL if warm else None)
