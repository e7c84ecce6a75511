"""Projections: state derived from the log by one ``apply`` function (DESIGN.md "Projections").

The live store runs :func:`Projections.apply` on a leaf and the event's private body; ``saihm
rebuild`` runs the bulk apply (saihm/projections/bulk.py) over runs of leaves, which writes the
rows of the same handlers, sorted per namespace, so a rebuild into fresh databases is
byte-identical to the live ones. One module per projection (holders, cells, contracts, grants,
governance, receipts, meta) holds its database names, its apply handlers and its typed
queries; the record types and their encodings are in saihm/events/records.py. ``meta`` records
how far the log has been applied, in the same write transaction as the state it describes.
"""

from saihm.events.records import (
    Body,
    CellRecord,
    ContractRecord,
    ErasureRecord,
    GrantRecord,
    HolderRecord,
    ProposalRecord,
    RecordError,
    RecordHead,
    RevocationRecord,
    Tally,
    Vote,
)
from saihm.projections.apply import Projections, ProjectionState, StaleProjections
from saihm.projections.keys import LeafView, u64
from saihm.projections.seal import RecordSeal, derive_record_key

__all__ = [
    "Body",
    "CellRecord",
    "ContractRecord",
    "ErasureRecord",
    "GrantRecord",
    "HolderRecord",
    "LeafView",
    "ProjectionState",
    "Projections",
    "ProposalRecord",
    "RecordError",
    "RecordHead",
    "RecordSeal",
    "RevocationRecord",
    "StaleProjections",
    "Tally",
    "Vote",
    "derive_record_key",
    "u64",
]
