"""The store's background jobs: the checkpointer and the KEK schedule, on one thread.

Started by the composition root (saihm/compose.py ``open_operator``, ``saihm serve``), never
by opening a store. Each job survives every exception, backs off and records its last success
in the store's :class:`~saihm.jobs.JobBoard` (``Store.job_health``, ``/ops``); a failing one
never stops the other. :meth:`BackgroundJobs.stop` joins the thread, and the store calls it
before its storage closes, so a clean shutdown never races a checkpoint against the close.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from saihm.jobs import JobBoard

#: A job: its name on the board and the work of one tick.
Job = tuple[str, Callable[[], object]]


class BackgroundJobs:
    """Runs ``jobs`` in order every ``interval`` seconds on a daemon thread."""

    def __init__(self, board: JobBoard, interval: float, jobs: Sequence[Job]) -> None:
        self.board = board
        self.interval = interval
        self.jobs = list(jobs)
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> BackgroundJobs:
        """Start the thread (once); returns self."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name="saihm-jobs", daemon=True)
            self.thread.start()
        return self

    def alive(self) -> bool:
        """Whether the thread is running (``/ops`` ``checkpointer_alive``)."""
        return self.thread is not None and self.thread.is_alive()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the loop to end and wait for it: a tick under way finishes first."""
        self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            for name, job in self.jobs:
                self.board.run(name, job, self.interval)
