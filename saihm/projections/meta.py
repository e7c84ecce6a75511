"""How far the projections reflect the log, and in which schema: ``p_meta``.

Written in the same write transaction as the state it describes (:meth:`Meta.mark_applied`),
read back when a store opens (:meth:`Meta.state`, :meth:`ProjectionState.require_current`), so
a store whose projections lag the log or were written under another schema refuses to serve
them (saihm-protocol "Order of effect and receipt").
"""

from __future__ import annotations

from dataclasses import dataclass

from saihm.errors import Unavailable
from saihm.events.records import SCHEMA_VERSION, RecordError, read_u64, u64
from saihm.projections.tables import Projection, Txn

META = b"p_meta"  # b"applied" -> u64 leaves applied; b"format" -> u64 schema version
APPLIED = b"applied"
FORMAT = b"format"
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
                "(written before record MACs); "
                "run `saihm rebuild --data DIR --replace`"
            )


class Meta(Projection):
    """``p_meta``: the applied index and the schema version."""

    DB_NAMES = (META,)

    __slots__ = ()

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
        (call in the same write transaction as the state)."""
        self.t.put(txn, META, APPLIED, u64(count))
        self.t.put(txn, META, FORMAT, u64(PROJECTION_FORMAT))
