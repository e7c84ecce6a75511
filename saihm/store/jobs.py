"""The store's background jobs and their health.

:class:`JobBoard` records every background job (the checkpoint loop, the KEK rotation
schedule) and the work done after a commit (the checkpoint a batch may sign). A failure is
logged with the error's class or errno name only (never its message, which could carry a path
or a value), the job backs off exponentially, and the time of its last success stays readable
for ``/healthz`` and ``saihm_status`` extensions (:meth:`JobBoard.snapshot`).

:class:`BackgroundJobs` runs the checkpointer and the KEK schedule on one thread. It is started
by the composition root (saihm/compose.py ``open_operator``, ``saihm serve``), never by opening
a store; a failing job never stops the other. :meth:`BackgroundJobs.stop` joins the thread, and
the store calls it before its storage closes, so a clean shutdown never races a checkpoint
against the close.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from saihm.errors import SaihmError

__all__ = ["MAX_BACKOFF", "BackgroundJobs", "JobBoard", "JobState", "error_code"]

log = logging.getLogger("saihm.store")

#: The longest back-off after repeated failures, in seconds: a failing background job is
#: retried at least every five minutes.
MAX_BACKOFF = 300.0


def error_code(err: BaseException) -> str:
    """A short, secret-free name for ``err``: the protocol code of a ``SaihmError``, the errno
    name of an ``OSError`` (``ENOSPC``), else the exception's class name."""
    if isinstance(err, SaihmError):
        return err.code
    if isinstance(err, OSError) and err.errno is not None and err.errno in errno.errorcode:
        return errno.errorcode[err.errno]
    return type(err).__name__


@dataclass
class JobState:
    """One job's record: last success and failure (store-clock UNIX seconds), the last error's
    code, consecutive failures, and (monotonic) when it may run next."""

    last_success: float | None = None
    last_failure: float | None = None
    last_error: str | None = None
    failures: int = 0
    next_run: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "last_success": self.last_success,
            "last_failure": self.last_failure,
            "last_error": self.last_error,
            "consecutive_failures": self.failures,
        }


class JobBoard:
    """The jobs of one store, run and recorded under a lock (threads of one process)."""

    def __init__(self, clock: Callable[[], float], names: tuple[str, ...]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._jobs = {name: JobState() for name in names}

    def snapshot(self) -> dict[str, dict[str, object]]:
        """``{job: {"last_success", "last_failure", "last_error", "consecutive_failures"}}``."""
        with self._lock:
            return {name: state.as_dict() for name, state in self._jobs.items()}

    def succeeded(self, name: str) -> None:
        with self._lock:
            state = self._jobs[name]
            state.last_success = self._clock()
            state.failures = 0
            state.next_run = 0.0

    def failed(self, name: str, err: BaseException, interval: float) -> None:
        """Record and log a failure; the job's next run waits ``interval`` × 2^failures."""
        code = error_code(err)
        with self._lock:
            state = self._jobs[name]
            state.failures += 1
            state.last_failure = self._clock()
            state.last_error = code
            delay = min(max(interval, 0.01) * 2 ** min(state.failures, 16), MAX_BACKOFF)
            state.next_run = time.monotonic() + delay
            failures = state.failures
        log.error("%s failed (%s, %d in a row); retrying in %.1f s", name, code, failures, delay)

    def due(self, name: str) -> bool:
        with self._lock:
            return time.monotonic() >= self._jobs[name].next_run

    def run(self, name: str, job: Callable[[], object], interval: float) -> bool:
        """Run ``job`` if its backoff allows; record the outcome. Never raises ``Exception``."""
        if not self.due(name):
            return False
        try:
            job()
        except Exception as err:  # a background job survives every exception (STYLE.md)
            self.failed(name, err, interval)
            return False
        self.succeeded(name)
        return True


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
