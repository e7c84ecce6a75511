"""How far the projections reflect the log, and in which schema: ``p_meta``.

Written in the same write transaction as the state it describes (:meth:`Meta.mark_applied`),
read back when a store opens (:meth:`Meta.state`, :meth:`ProjectionState.require_current`), so
a store whose projections lag the log or were written under another schema refuses to serve
them (saihm-protocol "Order of effect and receipt").

``p_meta`` also holds the sealed count of session revocations (:class:`RevocationCount`): how
many records ``p_session_revocations`` holds, bound by the record MAC to the applied index it
was written with. A revocation deleted at rest, or the whole namespace lost or renumbered,
then no longer matches the count, and authentication fails closed (saihm/store/auth.py)
instead of re-opening the session.
"""

from __future__ import annotations

from dataclasses import dataclass

from saihm.errors import Unavailable
from saihm.events.records import SCHEMA_VERSION, RecordError, read_u64, u64
from saihm.projections.tables import Projection, Txn

META = b"p_meta"  # b"applied" -> u64 leaves applied; b"format" -> u64 schema version;
# b"revocations" -> sealed u64 applied || u64 session revocations (RevocationCount)
APPLIED = b"applied"
FORMAT = b"format"
REVOCATIONS = b"revocations"
#: The schema version the projections are written in (saihm/events/records.py).
PROJECTION_FORMAT = SCHEMA_VERSION


class StaleProjections(Unavailable):
    """The projections do not match the log; ``saihm rebuild --replace`` repairs them."""


@dataclass(frozen=True, slots=True)
class ProjectionState:
    """What ``p_meta`` says: how many leaves are applied, and the schema version (None for
    projections written before versions were stored)."""

    applied: int
    format: int | None

    def require_current(self, size: int) -> None:
        """Raise :class:`StaleProjections` (naming ``saihm rebuild --replace``) unless the
        projections reflect all ``size`` leaves of the log in :data:`PROJECTION_FORMAT`. A
        fresh store (empty log, no projections) passes."""
        if self.applied != size:
            raise StaleProjections(
                f"projections reflect {self.applied} of {size} log entries; "
                "run `saihm rebuild --data DIR --replace`"
            )
        if size and self.format != PROJECTION_FORMAT:
            raise StaleProjections(
                f"projections are of format {self.format or 1}, not {PROJECTION_FORMAT} "
                "(written by an older saihm); "
                "run `saihm rebuild --data DIR --replace`"
            )


@dataclass(frozen=True, slots=True)
class RevocationCount:
    """How many session revocations ``p_session_revocations`` holds (``count``), as written
    with the applied index ``applied``; stored sealed (saihm/projections/seal.py) under
    :data:`REVOCATIONS` as ``u64 applied || u64 count``."""

    applied: int
    count: int

    def encode(self) -> bytes:
        """The stored form, before its MAC."""
        return u64(self.applied) + u64(self.count)

    @classmethod
    def decode(cls, value: bytes) -> RevocationCount:
        """The count in ``value``; :class:`RecordError` unless it is two u64."""
        if len(value) != 16:
            raise RecordError("a revocation count is 16 bytes")
        return cls(read_u64(value[:8]), read_u64(value[8:]))


class Meta(Projection):
    """``p_meta``: the applied index, the schema version and the revocation count."""

    DB_NAMES = (META,)

    __slots__ = ()

    def revocations(self, txn: Txn) -> RevocationCount | None:
        """The stored revocation count, or None when it is missing, its MAC fails or it does
        not decode (the revocations then cannot be trusted to be complete)."""
        value = self.t.seal.open(META, REVOCATIONS, self.t.raw(txn, META, REVOCATIONS))
        try:
            return None if value is None else RevocationCount.decode(value)
        except RecordError:
            return None

    def _carried(self, txn: Txn) -> RevocationCount | None:
        """The count to carry forward in a write: the stored one if it was written with the
        stored applied index, a zero count for projections that reflect nothing yet (a fresh
        store, or a rebuild before its first batch), else None. A count that is missing or
        belongs to another applied index (deleted, or put back from an older copy) is never
        re-derived from the revocations as stored, which may have lost records with it: it
        stays missing until ``saihm rebuild --replace``."""
        applied = self.t.raw(txn, META, APPLIED)
        try:
            stored_applied = 0 if applied is None else read_u64(applied)
        except RecordError:
            return None
        found = self.revocations(txn)
        if found is None:
            return RevocationCount(0, 0) if stored_applied == 0 else None
        return found if found.applied == stored_applied else None

    def _put_revocations(self, txn: Txn, count: RevocationCount) -> None:
        self.t.put_sealed(txn, META, REVOCATIONS, count.encode())

    def count_revocation(self, txn: Txn) -> None:
        """One more record was filed in ``p_session_revocations`` (same write transaction)."""
        carried = self._carried(txn)
        if carried is not None:
            self._put_revocations(txn, RevocationCount(carried.applied, carried.count + 1))

    def state(self, txn: Txn) -> ProjectionState:
        """The applied index and schema version as stored; :class:`StaleProjections` when
        either is not a u64 (the projections cannot be trusted to reflect anything)."""
        applied = self.t.get(txn, META, APPLIED)
        fmt = self.t.get(txn, META, FORMAT)
        try:
            return ProjectionState(
                0 if applied is None else read_u64(applied),
                None if fmt is None else read_u64(fmt),
            )
        except RecordError as err:
            raise StaleProjections(
                "the projections' applied index or schema version is damaged; "
                "run `saihm rebuild --data DIR --replace`"
            ) from err

    def mark_applied(self, txn: Txn, count: int) -> None:
        """Record that the first ``count`` leaves are reflected, in :data:`PROJECTION_FORMAT`
        (call in the same write transaction as the state), with the revocation count."""
        carried = self._carried(txn)
        self.t.put(txn, META, APPLIED, u64(count))
        self.t.put(txn, META, FORMAT, u64(PROJECTION_FORMAT))
        if carried is not None:
            self._put_revocations(txn, RevocationCount(count, carried.count))
