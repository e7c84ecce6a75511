"""The rotation lock: one KEK rotation at a time, across every process of one operator.

An exclusive ``flock`` on ``rotate.lock`` in the KEK directory, held from before a new
generation is issued until every older generation has been checked and retired
(docs/operations.md "KEK rotation"). ``flock`` locks belong to an open file description, so
two threads of one process exclude each other as two processes do, and the kernel releases
the lock when its holder dies (``kill -9`` included): a crashed rotation never blocks the next.

Deliberately a separate file from the KEK directory's own ``.lock`` (which ``new_generation``
and ``retire`` take briefly inside a rotation): a process cannot take one ``flock`` twice on
two descriptors without waiting for itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from saihm.keyring.errors import RotationBusy

__all__ = ["ROTATION_LOCK", "rotation_lock"]

ROTATION_LOCK = "rotate.lock"
_POLL = 0.05


@contextlib.contextmanager
def rotation_lock(kek_path: str | os.PathLike[str], *, wait: float | None) -> Iterator[None]:
    """Hold the rotation lock of the KEK directory at ``kek_path`` for the ``with`` block.

    ``wait`` None blocks until the lock is free; 0 tries once; a positive number retries for
    that many seconds. Raises ``RotationBusy`` when the lock is still held by another rotation
    after ``wait``; ``OSError`` if the lock file cannot be opened.
    """
    fd = os.open(Path(kek_path) / ROTATION_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if wait is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise RotationBusy("another KEK rotation is running") from None
                    time.sleep(_POLL)
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the lock
