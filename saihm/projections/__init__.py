"""Projections: state derived from the log by one ``apply`` function (DESIGN.md "Projections").

The live store and ``saihm rebuild`` run the same :func:`Projections.apply` on the same inputs, a
leaf and the event's private body, so a rebuild into fresh databases is byte-identical to the
live ones. Each projection is a named LMDB database; ``meta`` records how far the log has been
applied, in the same write transaction as the state it describes.
"""

from saihm.projections.apply import Projections
from saihm.projections.keys import Body, LeafView, u64
from saihm.projections.seal import RecordSeal, derive_record_key

__all__ = ["Body", "LeafView", "Projections", "RecordSeal", "derive_record_key", "u64"]
