"""Key encodings and the light views of a leaf and a private body the projections read.

Leaves are decoded with plain ``cbor2.loads`` here, not the strict model codec: they were
strictly encoded when written and are verified by ``saihm verify``; a rebuild must run at
100,000 events/s, which pydantic validation per leaf would not allow.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

import cbor2

_U64 = struct.Struct(">Q")


def u64(value: int) -> bytes:
    """Encode an unsigned 64-bit integer big-endian, so LMDB's byte order is numeric order."""
    return _U64.pack(value)


def read_u64(data: bytes | memoryview) -> int:
    """Decode :func:`u64`."""
    return _U64.unpack(data)[0]


def dumps(value: object) -> bytes:
    """Deterministic CBOR for projection values (RFC 8949 §4.2.1), so rebuilds compare bytewise.

    Every projection map has small integer keys (< 24) written in ascending order, for which
    cbor2's plain encoding is byte-identical to the canonical one and three times faster (this
    runs several times per event of a rebuild). tests/store/test_projection_values.py checks
    every stored value is canonical.
    """
    return cbor2.dumps(value)


def loads(data: bytes | memoryview) -> object:
    """Decode a projection value written by :func:`dumps`."""
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


@dataclass(frozen=True, slots=True)
class Body:
    """The private part of an event, stored in ``bodies`` under its subjectId.

    CBOR map: 1 = the cell or contract in its wire encoding; 2 = the cell's session tag (an HMAC
    of holderId and sessionId under the memo key: an untrusted hint for candidate lookup);
    3 = the record sequence number for record cells (absent for memory cells); 4 = true for
    the record cell that ends its session's chain (absent otherwise).
    """

    object_cbor: bytes
    session_tag: bytes | None = None
    record_seq: int | None = None
    record_end: bool = False

    def encode(self) -> bytes:
        """The stored form."""
        m: dict[int, object] = {1: self.object_cbor}
        if self.session_tag is not None:
            m[2] = self.session_tag
        if self.record_seq is not None:
            m[3] = self.record_seq
        if self.record_end:
            m[4] = True
        return dumps(m)

    @classmethod
    def decode(cls, data: bytes | memoryview) -> Body:
        """Read the stored form."""
        m = loads(data)
        if not isinstance(m, dict) or not isinstance(m.get(1), bytes):
            raise ValueError("malformed event body")
        return cls(m[1], m.get(2), m.get(3), m.get(4, False))
