"""The stored records of the projections, and the private body of an event: one type each.

Every projection value is one of these frozen types, and each type's CBOR encoding lives here
and only here: a map with small integer keys in ascending order (deterministic CBOR, RFC 8949
§4.2.1, for which cbor2's plain encoding is the canonical one), or a big-endian u64. The
operator's projections (saihm/projections/) write and read them; the offline verifier
(saihm/audit/datadir.py) reads the public ones (the erasure list and the tallies) from a data
directory with the same types. They sit in ``saihm.events`` because that is the lowest layer
both may import (DESIGN.md "Layers").

``decode`` is strict: a value that is not the encoding of a record of its type raises
:class:`RecordError` (a ``VerificationFailed``), never a ``KeyError`` or ``TypeError``;
``encode(decode(x)) == x`` for every valid ``x``. :data:`SCHEMA_VERSION` is the version of
this whole set of layouts; the projections store it beside their applied index
(saihm/projections/meta.py) and refuse to serve databases written under another one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self, TypeVar

import cbor2

from saihm.errors import VerificationFailed

__all__ = [
    "SCHEMA_VERSION",
    "Body",
    "CellRecord",
    "ContractRecord",
    "ErasureRecord",
    "GrantRecord",
    "HolderRecord",
    "ProposalRecord",
    "RecordError",
    "RecordHead",
    "RevocationRecord",
    "Tally",
    "Vote",
    "read_u64",
    "u64",
]

#: 3: ``p_meta`` holds the sealed count of session revocations (saihm/projections/meta.py);
#: 2: the access records carry record MACs (saihm/projections/seal.py); 1: before them.
SCHEMA_VERSION = 3

_U64 = struct.Struct(">Q")


class RecordError(VerificationFailed):
    """A stored projection record or event body that is not the encoding of its type."""

    code = "verification_failed"


def u64(value: int) -> bytes:
    """Encode an unsigned 64-bit integer big-endian, so byte order is numeric order."""
    return _U64.pack(value)


def read_u64(data: bytes | memoryview) -> int:
    """Decode :func:`u64`; :class:`RecordError` unless ``data`` is exactly 8 bytes."""
    if len(data) != 8:
        raise RecordError("a stored u64 is not 8 bytes")
    value: int = _U64.unpack(data)[0]
    return value


# -- strict field readers -------------------------------------------------------------------


def _map(data: bytes | memoryview, what: str, keys: frozenset[int]) -> dict[int, object]:
    """The CBOR map in ``data``, whose keys are ``keys`` (required ones are checked by the
    field readers); anything else raises :class:`RecordError`."""
    try:
        m = cbor2.loads(bytes(data))
    except Exception as err:  # cbor2 raises several types for damaged input
        raise RecordError(f"a stored {what} is not CBOR") from err
    if not isinstance(m, dict) or not m.keys() <= keys:
        raise RecordError(f"a stored {what} is not a {what} map")
    return m


_MAX_U64 = (1 << 64) - 1

# The field readers run for every record a query or a rebuild reads: each is one lookup and one
# test, and a missing field fails the same test as a wrong one (``m.get`` gives None).


def _bad(key: int, what: str, kind: str) -> RecordError:
    return RecordError(f"field {key} of a stored {what} is missing or not {kind}")


def _bytes(m: dict[int, object], key: int, what: str, size: int | None = 32) -> bytes:
    value = m.get(key)
    if type(value) is bytes and (size is None or len(value) == size):
        return value
    raise _bad(key, what, f"{size or 'some'} bytes")


def _int(m: dict[int, object], key: int, what: str) -> int:
    value = m.get(key)
    if type(value) is int and 0 <= value <= _MAX_U64:
        return value
    raise _bad(key, what, "an unsigned integer")


def _bool(m: dict[int, object], key: int, what: str) -> bool:
    value = m.get(key)
    if type(value) is bool:
        return value
    raise _bad(key, what, "a boolean")


def _str(m: dict[int, object], key: int, what: str) -> str:
    value = m.get(key)
    if type(value) is str:
        return value
    raise _bad(key, what, "text")


def _text(m: dict[int, object], key: int, what: str, *, nullable: bool = False) -> str | None:
    value = m.get(key, _bad)
    if value is None and nullable:
        return None
    if type(value) is str:
        return value
    raise _bad(key, what, "text or null" if nullable else "text")


def _ids(m: dict[int, object], key: int, what: str) -> tuple[bytes, ...]:
    value = m.get(key)
    if type(value) is list:
        for v in value:
            if type(v) is not bytes or len(v) != 32:
                break
        else:
            return tuple(value)
    raise _bad(key, what, "a list of ids")


def _blob(m: dict[int, object], key: int, what: str) -> bytes:
    """Bytes of any length."""
    return _bytes(m, key, what, None)


def _nullable_text(m: dict[int, object], key: int, what: str) -> str | None:
    return _text(m, key, what, nullable=True)


def _session_tag(m: dict[int, object], key: int, what: str) -> bytes:
    """A session tag: 32 bytes, or empty for a cell that has none."""
    tag = _bytes(m, key, what, None)
    if len(tag) not in (0, 32):
        raise RecordError(f"field {key} of a stored {what} is not a session tag")
    return tag


def _namespaces(m: dict[int, object], key: int, what: str) -> tuple[str, ...] | None:
    """A list of namespace names, or null for every namespace."""
    raw = m.get(key, _bad)
    if raw is None:
        return None
    if type(raw) is list and all(type(n) is str for n in raw):
        return tuple(raw)
    raise RecordError(f"field {key} of a stored {what} is not a list of namespaces")


def _flag(m: dict[int, object], key: int, what: str) -> bool:
    """A key that is either absent (false) or holds ``true``."""
    if key not in m:
        return False
    if m[key] is not True:
        raise RecordError(f"field {key} of a stored {what} is not true")
    return True


_Reader = Callable[[dict[int, object], int, str], object]

# How one attribute sits in a record's map, for :class:`_Layout`: the strict reader above that
# checks and returns it. A record's ``encode`` writes the same map by hand (see _MapRecord).
ID: _Reader = _bytes
BLOB: _Reader = _blob
INT: _Reader = _int
STR: _Reader = _str
BOOL: _Reader = _bool
IDS: _Reader = _ids
NULLABLE_TEXT: _Reader = _nullable_text
SESSION_TAG: _Reader = _session_tag
NAMESPACES: _Reader = _namespaces
#: ``true`` when set, the key absent when not.
FLAG: _Reader = _flag


def _optional(reader: _Reader) -> _Reader:
    """``reader`` for a key that is absent when the attribute is None."""

    def read(m: dict[int, object], key: int, what: str) -> object:
        return reader(m, key, what) if key in m else None

    return read


@dataclass(frozen=True, slots=True)
class _Layout:
    """A record's CBOR map as a table for its decoder: ``fields[i]`` is the key and the strict
    reader of the record's i-th dataclass field, in ascending key order (the deterministic
    encoding). The one decoder of every map record reads through it."""

    what: str
    fields: tuple[tuple[int, _Reader], ...]
    keys: frozenset[int]

    @classmethod
    def of(cls, what: str, *fields: tuple[int, _Reader]) -> _Layout:
        keys = [key for key, _ in fields]
        if keys != sorted(set(keys)):
            raise AssertionError(f"{what}: keys must ascend without repeats")
        return cls(what, fields, frozenset(keys))

    def read(self, data: bytes | memoryview) -> list[Any]:
        """The constructor arguments the map in ``data`` holds; :class:`RecordError` for
        anything that is not a map of these keys with values of these types."""
        m = _map(data, self.what, self.keys)
        return [read(m, key, self.what) for key, read in self.fields]


class _Encodable(Protocol):
    WHAT: ClassVar[str]

    def encode(self) -> bytes: ...


_R = TypeVar("_R", bound=_Encodable)


def _exact(record: _R, data: bytes | memoryview, authentic: bool = False) -> _R:
    """``record`` if ``data`` is exactly its encoding; a decoder that accepted trailing bytes
    or a non-canonical map would let two stored forms mean one record. ``authentic``: the bytes
    passed a record MAC, so this code's ``encode`` wrote them (in the current schema version,
    which the store checks on open), and the comparison is skipped."""
    if not authentic and record.encode() != data:
        raise RecordError(f"a stored {record.WHAT} is not in its deterministic encoding")
    return record


#: Bound once: each record's ``encode`` is the map literal and one call (a rebuild encodes a
#: record or more per event, so no loop over the layout and no ``getattr`` per field).
_dumps = cbor2.dumps


class _MapRecord:
    """What every map record shares: its decoder, read through its :class:`_Layout`. Each
    record writes its ``encode`` out by hand as the map literal of the same keys, the always
    present ones first and in ascending order, an optional key added after them when set
    (tests/projections/test_records.py checks that it is the layout's map, byte for byte)."""

    __slots__ = ()

    WHAT: ClassVar[str]
    _LAYOUT: ClassVar[_Layout]

    @classmethod
    def decode(cls, data: bytes | memoryview, *, authentic: bool = False) -> Self:
        """Read the stored form; raises :class:`RecordError`. ``authentic``: ``data`` passed
        its record MAC (saihm/projections/seal.py), which also proves it exact."""
        record = cls(*cls._LAYOUT.read(data))
        return _exact(record, data, authentic)

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT` (each record writes it out)."""
        raise NotImplementedError(type(self).__name__)


# -- the records ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HolderRecord(_MapRecord):
    """``p_holders``: holderId -> the holder's KEY receipt (saihm-protocol "Identity").

    CBOR ``{1: publicKey, 2: index, 3: timestamp}``.
    """

    #: The ML-DSA-65 public key the KEY receipt published (its detail).
    public_key: bytes
    #: Leaf index of the KEY receipt: a voter is eligible when it precedes the proposal.
    index: int
    #: The KEY receipt's timestamp.
    timestamp: int

    WHAT: ClassVar[str] = "holder record"
    _LAYOUT: ClassVar[_Layout] = _Layout.of(WHAT, (1, BLOB), (2, INT), (3, INT))

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT`."""
        return _dumps({1: self.public_key, 2: self.index, 3: self.timestamp})


@dataclass(frozen=True, slots=True)
class CellRecord(_MapRecord):
    """``p_cells``: cellId -> what the log says of a cell (saihm-protocol "Cell shape").

    CBOR ``{1: holderId, 2: tier, 3: kekVersion, 4: timestamp, 5: index, 6: sessionTag,
    7: erasedAt}``; key 7 only once the cell is forgotten.
    """

    #: The holderId that signed the cell (its key 2).
    owner: bytes
    #: The cell's tier (its key 4), e.g. ``"STANDARD"``.
    tier: str
    #: The KEK generation its DEK was first wrapped under (its key 3).
    kek_version: int
    #: The cell's timestamp (its key 8).
    timestamp: int
    #: Leaf index of the REMEMBER receipt.
    index: int
    #: The session tag of its body (an untrusted hint), or ``b""`` when it has none.
    session_tag: bytes
    #: Leaf index of the first FORGET receipt, or None while the cell is live.
    erased_at: int | None = None

    WHAT: ClassVar[str] = "cell record"
    _LAYOUT: ClassVar[_Layout] = _Layout.of(
        WHAT,
        (1, ID),
        (2, STR),
        (3, INT),
        (4, INT),
        (5, INT),
        (6, SESSION_TAG),
        (7, _optional(INT)),
    )

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT`."""
        m = {
            1: self.owner,
            2: self.tier,
            3: self.kek_version,
            4: self.timestamp,
            5: self.index,
            6: self.session_tag,
        }
        if self.erased_at is not None:
            m[7] = self.erased_at
        return _dumps(m)

    @property
    def erased(self) -> bool:
        """Whether a FORGET receipt names the cell."""
        return self.erased_at is not None


@dataclass(frozen=True, slots=True)
class RecordHead(_MapRecord):
    """``p_record_heads``: session tag -> the last record cell of that session's chain.

    CBOR ``{1: seq, 2: cellId, 3: ended}`` (DESIGN.md "Data at rest": seq/prev chain the
    record cells of one session; the "end" cell closes it).
    """

    #: The sequence number of the last record cell.
    seq: int
    #: Its cellId (the next record cell's ``prev``).
    cell_id: bytes
    #: Whether it was the "end" cell.
    ended: bool

    WHAT: ClassVar[str] = "record head"
    _LAYOUT: ClassVar[_Layout] = _Layout.of(WHAT, (1, INT), (2, ID), (3, BOOL))

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT`."""
        return _dumps({1: self.seq, 2: self.cell_id, 3: self.ended})


@dataclass(frozen=True, slots=True)
class ErasureRecord:
    """``p_erasures``: cellId -> the erasure (saihm-protocol "Erasure"); a u64, not a map."""

    #: Leaf index of the first FORGET receipt naming the cell.
    index: int

    WHAT: ClassVar[str] = "erasure"

    def encode(self) -> bytes:
        """The stored form: the index as a big-endian u64."""
        return u64(self.index)

    @classmethod
    def decode(cls, data: bytes | memoryview) -> ErasureRecord:
        """Read the stored form; raises :class:`RecordError`."""
        return _exact(cls(read_u64(data)), data)


@dataclass(frozen=True, slots=True)
class ContractRecord(_MapRecord):
    """``p_contracts``: contractId -> a sharing contract and what became of it
    (saihm-protocol "Sharing contracts"; the acceptances are the ACCEPT / DECLINE extension).

    CBOR ``{1: holderId, 2: granteeIds, 3: shardIds, 4: mode, 5: scope, 6: expiresAt,
    7: timestamp, 8: index, 9: revoked, 10: acceptedBy}``; keys 1..7 are the contract's keys
    2..8.
    """

    #: The sharing holder.
    holder: bytes
    #: The grantee holderIds, in the contract's order.
    grantees: tuple[bytes, ...]
    #: The shared cellIds, in the contract's order.
    shards: tuple[bytes, ...]
    #: ``"PERMANENT"`` or ``"TEMPORARY"``.
    mode: str
    #: The contract's scope, e.g. ``"read"``.
    scope: str
    #: Expiry epoch, 0 for none.
    expires_at: int
    #: The contract's timestamp.
    timestamp: int
    #: Leaf index of the SHARE receipt.
    index: int
    #: Whether the holder has revoked it (a REVOKE receipt signed by the holder).
    revoked: bool
    #: The grantees that have accepted it and not declined since, in byte order.
    accepted: tuple[bytes, ...]

    WHAT: ClassVar[str] = "contract record"
    _LAYOUT: ClassVar[_Layout] = _Layout.of(
        WHAT,
        (1, ID),
        (2, IDS),
        (3, IDS),
        (4, STR),
        (5, STR),
        (6, INT),
        (7, INT),
        (8, INT),
        (9, BOOL),
        (10, IDS),
    )

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT`."""
        return _dumps(
            {
                1: self.holder,
                2: list(self.grantees),
                3: list(self.shards),
                4: self.mode,
                5: self.scope,
                6: self.expires_at,
                7: self.timestamp,
                8: self.index,
                9: self.revoked,
                10: list(self.accepted),
            }
        )

    def active_for(self, grantee: bytes, now: int) -> bool:
        """Whether the contract shares its cells with ``grantee`` at ``now``: named among its
        grantees, accepted by it, not revoked and not expired."""
        live = not self.revoked and (self.expires_at == 0 or self.expires_at > now)
        return live and grantee in self.grantees and grantee in self.accepted


@dataclass(frozen=True, slots=True)
class GrantRecord(_MapRecord):
    """``p_grants``: grantId -> a wider scope a person granted (GRANT / UNGRANT extension,
    requirements.txt "Capabilities").

    CBOR ``{1: holderId, 2: namespaces, 3: expiresAt, 4: index, 5: revoked}``; namespaces is
    null for every namespace.
    """

    #: The holder whose sessions the grant widens.
    holder: bytes
    #: The namespaces it opens, in the grant's order, or None for all.
    namespaces: tuple[str, ...] | None
    #: Expiry epoch, 0 for none.
    expires_at: int
    #: Leaf index of the GRANT receipt.
    index: int
    #: Whether an UNGRANT signed by the holder withdrew it.
    revoked: bool

    WHAT: ClassVar[str] = "grant record"
    _LAYOUT: ClassVar[_Layout] = _Layout.of(
        WHAT, (1, ID), (2, NAMESPACES), (3, INT), (4, INT), (5, BOOL)
    )

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT`."""
        namespaces = None if self.namespaces is None else list(self.namespaces)
        return _dumps(
            {1: self.holder, 2: namespaces, 3: self.expires_at, 4: self.index, 5: self.revoked}
        )


@dataclass(frozen=True, slots=True)
class RevocationRecord(_MapRecord):
    """``p_session_revocations``: revocation subject -> the UNGRANT that revoked every token
    of a holder carrying one tokenId or sessionId (docs/formats.md "Session revocation").

    CBOR ``{1: holderId, 2: index}``.
    """

    #: The holder that signed the UNGRANT.
    holder: bytes
    #: Its leaf index.
    index: int

    WHAT: ClassVar[str] = "session revocation"
    _LAYOUT: ClassVar[_Layout] = _Layout.of(WHAT, (1, ID), (2, INT))

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT`."""
        return _dumps({1: self.holder, 2: self.index})


@dataclass(frozen=True, slots=True)
class ProposalRecord(_MapRecord):
    """``p_proposals``: proposalId -> the first PROPOSE receipt with that id
    (saihm-protocol "saihm_governance_propose").

    CBOR ``{1: scope, 2: paramKey, 3: proposedValue, 4: snapshotEpoch, 5: proposer, 6: index,
    7: timestamp}``; paramKey and proposedValue are null for a protocol upgrade.
    """

    #: ``"emission_param"`` or ``"protocol_upgrade"``.
    scope: str
    #: The governed parameter, or None.
    param_key: str | None
    #: Its proposed value, or None.
    proposed_value: str | None
    #: The snapshot epoch: the voting window opens here.
    snapshot_epoch: int
    #: The proposing holder.
    proposer: bytes
    #: Leaf index of the PROPOSE receipt (voter eligibility is decided against it).
    index: int
    #: The PROPOSE receipt's timestamp.
    timestamp: int

    WHAT: ClassVar[str] = "proposal record"
    _LAYOUT: ClassVar[_Layout] = _Layout.of(
        WHAT,
        (1, STR),
        (2, NULLABLE_TEXT),
        (3, NULLABLE_TEXT),
        (4, INT),
        (5, ID),
        (6, INT),
        (7, INT),
    )

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT`."""
        return _dumps(
            {
                1: self.scope,
                2: self.param_key,
                3: self.proposed_value,
                4: self.snapshot_epoch,
                5: self.proposer,
                6: self.index,
                7: self.timestamp,
            }
        )


@dataclass(frozen=True, slots=True)
class Vote(_MapRecord):
    """``p_votes``: proposalId || holderId -> the first VOTE of that holder on that proposal
    (saihm-protocol "saihm_governance_vote").

    CBOR ``{1: approve, 2: weight, 3: castAt, 4: index}``.
    """

    #: The vote.
    approve: bool
    #: Its weight (the published vote-weight function).
    weight: int
    #: The VOTE receipt's timestamp.
    cast_at: int
    #: Its leaf index.
    index: int

    WHAT: ClassVar[str] = "vote"
    _LAYOUT: ClassVar[_Layout] = _Layout.of(WHAT, (1, BOOL), (2, INT), (3, INT), (4, INT))

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT`."""
        return _dumps({1: self.approve, 2: self.weight, 3: self.cast_at, 4: self.index})


@dataclass(frozen=True, slots=True)
class Tally(_MapRecord):
    """``p_tallies``: proposalId -> the weights counted so far (saihm-protocol governance
    form: ``tally_for``, ``tally_against``, ``tally_abstain``).

    CBOR ``{1: for, 2: against, 3: abstain}``. Published: the verifier reads it too.
    """

    votes_for: int = 0
    votes_against: int = 0
    votes_abstain: int = 0

    WHAT: ClassVar[str] = "tally"
    _LAYOUT: ClassVar[_Layout] = _Layout.of(WHAT, (1, INT), (2, INT), (3, INT))

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT`."""
        return _dumps({1: self.votes_for, 2: self.votes_against, 3: self.votes_abstain})

    def counted(self, approve: bool, weight: int) -> Tally:
        """This tally with one more vote of ``weight``."""
        if approve:
            return Tally(self.votes_for + weight, self.votes_against, self.votes_abstain)
        return Tally(self.votes_for, self.votes_against + weight, self.votes_abstain)


@dataclass(frozen=True, slots=True)
class Body(_MapRecord):
    """The private part of an event, stored in ``bodies`` under its subjectId.

    CBOR ``{1: object, 2: sessionTag, 3: recordSeq, 4: recordEnd}``: 1 = the cell or contract
    in its wire encoding; 2 = the cell's session tag (an HMAC of holderId and sessionId under
    the memo key: an untrusted hint for candidate lookup); 3 = the record sequence number for
    record cells (absent for memory cells); 4 = true for the record cell that ends its
    session's chain (absent otherwise).
    """

    object_cbor: bytes
    session_tag: bytes | None = None
    record_seq: int | None = None
    record_end: bool = False

    WHAT: ClassVar[str] = "event body"
    _LAYOUT: ClassVar[_Layout] = _Layout.of(
        WHAT, (1, BLOB), (2, _optional(BLOB)), (3, _optional(INT)), (4, FLAG)
    )

    def encode(self) -> bytes:
        """The stored form: the map of :attr:`_LAYOUT`."""
        m: dict[int, object] = {1: self.object_cbor}
        if self.session_tag is not None:
            m[2] = self.session_tag
        if self.record_seq is not None:
            m[3] = self.record_seq
        if self.record_end:
            m[4] = True
        return _dumps(m)
