"""The store's keys in use: custodied holder signing keys and KEK rotation (docs/formats.md §4).

A rotation re-wraps every live DEK and seed under a new KEK generation and retires the old
ones (:meth:`saihm.keyring.Keyring.rotate`); the schedule (:meth:`KeyRotation.rotate_if_due`)
bounds when an erasure becomes cryptographically complete. Every rotation, run or tried,
empties the recall cache (docs/retrieval.md), so the next reads check every cell again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from saihm.errors import Unavailable
from saihm.events.identity import HolderKey
from saihm.keyring import KeyringError, RotationBusy
from saihm.storage import StorageFull
from saihm.store.environment import Environment
from saihm.store.jobs import JobBoard

log = logging.getLogger("saihm.store")

CHECKPOINT_JOB = "checkpoint"
KEK_JOB = "kek_rotation"
JOBS = (CHECKPOINT_JOB, KEK_JOB)


class HolderKeys:
    """The custodied signing key of each holder, derived from its wrapped seed once."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.cached: dict[bytes, HolderKey] = {}

    def get(self, holder_id: bytes) -> HolderKey:
        """The custodied signing key of ``holder_id`` (cached; derived from the wrapped seed).

        Raises ``NotFound`` for a holder with no seed, ``KekUnavailable`` for an unwrappable
        one."""
        key = self.cached.get(holder_id)
        if key is None:
            with self.env.storage.read() as txn:
                seed = self.env.keyring.seed(txn, holder_id)
            key = HolderKey.from_seed(seed)
            self.cached[holder_id] = key
        return key


class KeyRotation:
    """KEK rotation, by hand (``saihm rotate-kek``) and on the schedule (the background jobs).

    ``on_rotation`` runs after every rotation run or tried (the store empties its recall
    cache there); ``jobs`` is read for the schedule's last outcome.
    """

    def __init__(self, env: Environment, jobs: JobBoard, on_rotation: Callable[[], None]) -> None:
        self.env = env
        self.jobs = jobs
        self.on_rotation = on_rotation

    def rotate(self, wait: float | None = None) -> int:
        """Re-wrap every live DEK and seed under a new KEK generation, then retire the old ones.

        Waits up to ``wait`` seconds (None: as long as it takes) for a rotation another process
        is running, then raises ``RotationBusy`` (:meth:`Keyring.rotate`).
        """
        version = self._rotate(wait=wait, due=None, issued_at=self.env.clock())
        if version is None:  # pragma: no cover - only a ``due`` predicate returns None
            raise KeyringError("rotation did not run")
        return version

    def rotate_if_due(self, now: float | None = None) -> int | None:
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
        env = self.env
        hours = env.config.kek_rotation_hours
        if hours <= 0:
            return None
        when = env.clock() if now is None else now
        kek_dir = env.kek_dir

        # Also due at once while an older generation is live: a rotation that failed or was
        # killed part-way is completed on the next tick, not a period later; unless the last
        # attempt found keys it could not re-wrap (damaged entries keep their generation
        # live), which a rotation every tick would not mend.
        job = self.jobs.snapshot()[KEK_JOB]
        finish = not (job["consecutive_failures"] and job["last_error"] == KeyringError.code)

        def due() -> bool:
            if finish and len(kek_dir.live_versions()) > 1:
                return True
            issued = kek_dir.issued_at(kek_dir.current_version)
            return when - issued >= hours * 3600

        if not due():
            return None
        try:
            version = self._rotate(wait=0, due=due, issued_at=when)
        except RotationBusy:
            return None
        if version is not None:
            log.info("scheduled KEK rotation: generation %d in force, older ones retired", version)
        return version

    def _rotate(
        self, *, wait: float | None, due: Callable[[], bool] | None, issued_at: float
    ) -> int | None:
        """One rotation; if the map is full for the re-wrap, grow it once and try again."""
        env = self.env
        try:
            for attempt in (0, 1):
                try:
                    return env.keyring.rotate(
                        wait=wait, due=due, issued_at=issued_at, hook=self._step
                    )
                except StorageFull:
                    if attempt or not env.storage.grow():
                        raise Unavailable("storage full: the KEK re-wrap did not fit") from None
                    due = None  # the first attempt issued a generation: finish it regardless
            return None  # pragma: no cover
        finally:
            self.on_rotation()

    def _step(self, step: str) -> None:
        self.env.fault("rotate." + step)
