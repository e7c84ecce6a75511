"""Key encodings and the light view of a leaf the projections read.

Leaves are decoded with plain ``cbor2.loads`` here, not the strict model codec: they were
strictly encoded when written and are verified by ``saihm verify``; a rebuild must run at
100,000 events/s, which pydantic validation per leaf would not allow. The stored records and
the private body are typed in saihm/events/records.py (re-exported here).
"""

from __future__ import annotations

from typing import NamedTuple

import cbor2

from saihm.events.records import Body, read_u64, u64

__all__ = ["Body", "LeafView", "dumps", "loads", "read_u64", "u64"]


def dumps(value: object) -> bytes:
    """Deterministic CBOR for small integer-keyed maps (RFC 8949 §4.2.1).

    For maps with small integer keys (< 24) written in ascending order cbor2's plain encoding
    is byte-identical to the canonical one and three times faster. The projections encode
    their records with the record types (saihm/events/records.py); this stays for tests and
    tools that build raw values.
    """
    return cbor2.dumps(value)


def loads(data: bytes | memoryview) -> object:
    """Decode a value written by :func:`dumps`."""
    return cbor2.loads(bytes(data))


class LeafView(NamedTuple):
    """The public fields of one receipt leaf (saihm-protocol "Wire formats", keys 1..8).

    A named tuple rather than a dataclass: a rebuild makes one per event.
    """

    receipt_id: bytes
    subject_id: bytes
    operation: str
    holder_id: bytes
    timestamp: int
    detail: object

    @classmethod
    def from_leaf(cls, leaf: bytes) -> LeafView:
        """Read a stored leaf; the store wrote it with the strict codec."""
        m = cbor2.loads(leaf)
        return cls(m[1], m[2], m[3], m[4], m[6], m.get(7))
