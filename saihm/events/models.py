"""The CBOR records of saihm: cells, receipts, contracts, sealed payloads, capabilities.

Every model is a frozen pydantic v2 model with ``to_cbor()`` (deterministic CBOR, RFC 8949
§4.2.1) and a strict ``from_cbor(data)`` that accepts only the exact encoding ``to_cbor`` would
write and raises ``DecodeError`` otherwise. Integer map keys follow saihm-protocol "Wire
formats"; the formats saihm adds (sealed payload, capability, proposal, vote) are in
docs/formats.md §3. ``None`` is always written as CBOR null under its key, never by omitting the
key, except for the receipt's key 7 (detail), which the protocol says is present only when the
operation carries one.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Self

from pydantic import Field, Strict, model_validator

from saihm.errors import MalformedInput, rejects
from saihm.events._types import (
    FROZEN,
    U32,
    U64,
    Id32,
    Name,
    Nonce16,
    PublicKey65,
    Record,
    Signature65,
    build,
    need,
    read_map,
)
from saihm.events.capability import Capability, CapabilityScope
from saihm.events.codec import encode
from saihm.events.details import GrantDetail, ProposeDetail, VoteDetail
from saihm.events.errors import DecodeError
from saihm.events.governance import Proposal
from saihm.events.operations import Operation

__all__ = [
    "METADATA_MAX_BYTES",
    "Capability",
    "CapabilityScope",
    "Cell",
    "Contract",
    "GrantDetail",
    "Operation",
    "Proposal",
    "ProposeDetail",
    "Receipt",
    "SealedPayload",
    "VoteDetail",
    "check_metadata",
    "dump_metadata",
]


class Cell(Record):
    """A cell at rest (saihm-protocol "Cell shape"): {1: cellId, ..., 8: timestamp}."""

    model_config = FROZEN

    cell_id: Id32
    holder_id: Id32
    kek_version: U32
    tier: Name
    cell_nonce: Nonce16
    ciphertext: Annotated[bytes, Strict(), Field(min_length=16)]
    signature: Signature65
    timestamp: U64

    def to_cbor(self) -> bytes:
        """The protocol's CBOR map with keys 1..8."""
        return encode(
            {
                1: self.cell_id,
                2: self.holder_id,
                3: self.kek_version,
                4: self.tier,
                5: self.cell_nonce,
                6: self.ciphertext,
                7: self.signature,
                8: self.timestamp,
            }
        )

    @classmethod
    @rejects()
    def from_cbor(cls, data: bytes, *, authenticated: bool = False) -> Self:
        """Strictly decode a cell map; raises ``DecodeError``.

        ``authenticated=True`` is for bytes the store's HMAC memo vouches for (see
        ``codec.decode_authenticated``); every field is validated either way.
        """
        m = read_map(data, "cell", set(range(1, 9)), authenticated=authenticated)
        return build(
            cls,
            "cell",
            cell_id=m[1],
            holder_id=m[2],
            kek_version=m[3],
            tier=m[4],
            cell_nonce=m[5],
            ciphertext=m[6],
            signature=m[7],
            timestamp=m[8],
        )


Detail = PublicKey65 | ProposeDetail | VoteDetail | GrantDetail
_DETAIL_TYPE: dict[
    Operation, type[bytes] | type[ProposeDetail] | type[VoteDetail] | type[GrantDetail]
] = {
    Operation.KEY: bytes,
    Operation.PROPOSE: ProposeDetail,
    Operation.VOTE: VoteDetail,
    Operation.GRANT: GrantDetail,
}


class Receipt(Record):
    """A receipt (saihm-protocol "Audit log"): {1: receiptId, ..., 8: receiptNonce}.

    Key 7 (detail) is present exactly for KEY (public key bytes), PROPOSE, VOTE and GRANT.
    """

    model_config = FROZEN

    receipt_id: Id32
    subject_id: Id32
    operation: Operation
    holder_id: Id32
    signature: Signature65
    timestamp: U64
    receipt_nonce: Nonce16
    detail: Detail | None = None

    @model_validator(mode="after")
    def _detail_matches_operation(self) -> Self:
        want = _DETAIL_TYPE.get(self.operation)
        if want is None and self.detail is not None:
            raise ValueError(f"{self.operation.value} receipts carry no detail")
        if want is not None and type(self.detail) is not want:
            raise ValueError(f"{self.operation.value} receipts carry a {want.__name__} detail")
        return self

    @property
    def public_key(self) -> bytes:
        """The holder's ML-DSA-65 public key a KEY receipt carries; ``MalformedInput`` otherwise."""
        if not isinstance(self.detail, bytes):
            raise MalformedInput(f"a {self.operation.value} receipt carries no public key")
        return self.detail

    def detail_map(self) -> dict[str, Any] | None:
        """The PROPOSE, VOTE or GRANT detail as its CBOR map (None when there is none).

        A KEY receipt's detail is the public key, not a map: use :attr:`public_key`.
        """
        if self.detail is None or isinstance(self.detail, bytes):
            return None
        return self.detail.to_map()

    def unsigned_map(self) -> dict[int, Any]:
        """The receipt map without keys 1 (receiptId) and 5 (signature): what is signed."""
        m: dict[int, Any] = {
            2: self.subject_id,
            3: self.operation.value,
            4: self.holder_id,
            6: self.timestamp,
            8: self.receipt_nonce,
        }
        if self.detail is not None:
            m[7] = self.detail if isinstance(self.detail, bytes) else self.detail_map()
        return m

    def to_cbor(self) -> bytes:
        """The full receipt map: the log's leaf data (DESIGN.md "Data at rest")."""
        m = self.unsigned_map()
        m[1] = self.receipt_id
        m[5] = self.signature
        return encode(m)

    @classmethod
    @rejects()
    def from_cbor(cls, data: bytes) -> Self:
        """Strictly decode a receipt map; raises ``DecodeError``."""
        m = read_map(data, "receipt", {1, 2, 3, 4, 5, 6, 8}, frozenset({7}))
        try:
            op = Operation(need(m[3], str, "receipt operation"))
        except ValueError as err:
            raise DecodeError("receipt: unknown operation") from err
        detail: Any = m.get(7)
        if 7 in m:
            want = _DETAIL_TYPE.get(op)
            if want is None:
                raise DecodeError(f"receipt: {op.value} receipts carry no detail")
            if not issubclass(want, bytes):  # the table's one bytes entry is bytes itself
                detail = want.from_map(detail)
        return build(
            cls,
            "receipt",
            receipt_id=m[1],
            subject_id=m[2],
            operation=op,
            holder_id=m[4],
            signature=m[5],
            timestamp=m[6],
            receipt_nonce=m[8],
            detail=detail,
        )


class Contract(Record):
    """A sharing contract (saihm-protocol "Sharing contracts"), keys 1..10.

    Only structure is checked here; ``saihm.events.rules.check_contract_rules`` applies the
    protocol's rules on grantees, mode, scope and expiry.
    """

    model_config = FROZEN

    contract_id: Id32
    holder_id: Id32
    grantee_ids: Annotated[tuple[Id32, ...], Field(min_length=1)]
    shard_ids: Annotated[tuple[Id32, ...], Field(min_length=1)]
    mode: Annotated[str, Strict(), Field(min_length=1)]
    scope: Annotated[str, Strict(), Field(min_length=1)]
    expires_at: U64
    timestamp: U64
    signature: Signature65
    contract_nonce: Nonce16

    def unsigned_map(self) -> dict[int, Any]:
        """The contract map without keys 1 (contractId) and 9 (signature): what is signed."""
        return {
            2: self.holder_id,
            3: list(self.grantee_ids),
            4: list(self.shard_ids),
            5: self.mode,
            6: self.scope,
            7: self.expires_at,
            8: self.timestamp,
            10: self.contract_nonce,
        }

    def to_cbor(self) -> bytes:
        m = self.unsigned_map()
        m[1] = self.contract_id
        m[9] = self.signature
        return encode(m)

    @classmethod
    @rejects()
    def from_cbor(cls, data: bytes) -> Self:
        """Strictly decode a contract map; raises ``DecodeError``."""
        m = read_map(data, "contract", set(range(1, 11)))
        return build(
            cls,
            "contract",
            contract_id=m[1],
            holder_id=m[2],
            grantee_ids=tuple(need(m[3], list, "contract granteeIds")),
            shard_ids=tuple(need(m[4], list, "contract shardIds")),
            mode=m[5],
            scope=m[6],
            expires_at=m[7],
            timestamp=m[8],
            signature=m[9],
            contract_nonce=m[10],
        )


class SealedPayload(Record):
    """The plaintext inside a cell (DESIGN.md "Data at rest").

    CBOR {1: content, 2: sessionId, 3: namespace, 4: kind, 5: seq, 6: prev, 7: supersedes,
    8: metadata}; keys 1 to 6 are always present (an absent ``seq`` or ``prev`` is CBOR null),
    keys 7 and 8 only when set. ``supersedes`` is the cellId of the caller's cell this one
    replaced (``saihm_remember``'s ``supersedes``: that cell was forgotten in the same change);
    ``metadata`` is a writer's structure kept beside the text (compact JSON of an object, at
    most :data:`METADATA_MAX_BYTES` bytes), which recall returns but never ranks or shows as
    content. Both are sealed and signed with the cell, so they survive ``saihm rebuild`` and
    never reach the public log.
    """

    model_config = FROZEN

    content: Annotated[str, Strict(), Field(repr=False)]
    session_id: Id32
    namespace: Annotated[str, Strict(), Field(min_length=1, max_length=256)]
    kind: Literal["memory", "said", "did", "end"]
    seq: U64 | None = None
    prev: Id32 | None = None
    supersedes: Id32 | None = None
    metadata: Annotated[str | None, Strict(), Field(repr=False)] = None

    @model_validator(mode="after")
    def _metadata_is_a_json_object(self) -> Self:
        if self.metadata is not None:
            check_metadata(self.metadata)
        return self

    def to_cbor(self) -> bytes:
        body: dict[int, Any] = {
            1: self.content,
            2: self.session_id,
            3: self.namespace,
            4: self.kind,
            5: self.seq,
            6: self.prev,
        }
        if self.supersedes is not None:
            body[7] = self.supersedes
        if self.metadata is not None:
            body[8] = self.metadata
        return encode(body)

    @classmethod
    @rejects()
    def from_cbor(cls, data: bytes, *, authenticated: bool = False) -> Self:
        """Strictly decode a sealed payload; raises ``DecodeError``.

        ``authenticated=True`` is for plaintext that just passed its AES-GCM tag (see
        ``codec.decode_authenticated``); every field is validated either way.
        """
        m = read_map(
            data,
            "sealed payload",
            set(range(1, 7)),
            frozenset({7, 8}),
            authenticated=authenticated,
        )
        return build(
            cls,
            "sealed payload",
            content=m[1],
            session_id=m[2],
            namespace=m[3],
            kind=need(m[4], str, "sealed payload kind"),
            seq=m[5],
            prev=m[6],
            supersedes=need(m[7], bytes, "sealed payload supersedes") if 7 in m else None,
            metadata=need(m[8], str, "sealed payload metadata") if 8 in m else None,
        )


#: The most UTF-8 bytes of a sealed payload's ``metadata`` (its compact JSON).
METADATA_MAX_BYTES = 1024 * 1024


def check_metadata(text: str) -> None:
    """Raise ``ValueError`` unless ``text`` is the compact JSON of an object (no NaN or
    infinity) of at most :data:`METADATA_MAX_BYTES` UTF-8 bytes, exactly as
    :func:`dump_metadata` writes it."""
    if len(text.encode("utf-8", "surrogatepass")) > METADATA_MAX_BYTES:
        raise ValueError(f"metadata is over {METADATA_MAX_BYTES} bytes")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as err:
        raise ValueError("metadata is not JSON") from err
    if not isinstance(value, dict) or dump_metadata(value) != text:
        raise ValueError("metadata is not the compact JSON of an object")


def dump_metadata(value: dict[str, Any]) -> str:
    """The one text form of a metadata object: compact, in the writer's key order, UTF-8
    kept (a text with a repeated key is not this form of any object)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
