"""Pydantic models for every type of RFC 0007 "Memory Provider API" (draft, v2 direction).

Field names follow the RFC's TypeScript interfaces (snake_case as written there). Types the
RFC names but does not spell out (``MemoryProviderStatus``, ``MemoryStore``,
``MemoryRecordRef``, ``GraphQuery``, ``GraphExcerpt``) are defined here and documented in
docs/memory-provider.md. Every model forbids unknown fields, so a caller cannot smuggle a
filter in: visibility is decided by the capability, never by a field of a request.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)
from pydantic_core import PydanticCustomError

from saihm.errors import ErrorCode
from saihm.names import namespace_problem

PROVIDER_ID = "local-vault"
PROVIDER_VERSION = "0.1.0"
#: Largest ``limit`` a query may ask for, and the default when it asks for none.
MAX_LIMIT = 1000
DEFAULT_LIMIT = 50
#: Largest serialised ``content`` of one record (bytes of compact JSON).
MAX_CONTENT_BYTES = 65_536
#: ``MemoryRecord``'s optional fields (RFC ``confidence?``, ``verified_at?``, ``sources?``).
OPTIONAL_RECORD_FIELDS = ("confidence", "verified_at", "sources")

_STRICT = ConfigDict(extra="forbid", frozen=True)


def _namespace(value: str) -> str:
    """The shared namespace rule (saihm.names); its error type is ``bad_namespace``, which
    :func:`saihm.provider.records.schema_refusal` answers with that code."""
    problem = namespace_problem(value)
    if problem is not None:
        raise PydanticCustomError(ErrorCode.BAD_NAMESPACE, problem)
    return value


Namespace = Annotated[str, AfterValidator(_namespace)]
ConsumerName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[\x21-\x7e]+$")]
Mode = Literal["read", "write", "readwrite"]


def iso8601(epoch: int) -> str:
    """Seconds since the epoch as ISO 8601 UTC with a ``Z`` suffix."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_iso(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as err:
        raise ValueError("verified_at must be an ISO 8601 date-time") from err
    return value


class MemoryProviderStatus(BaseModel):
    """``status()``: health and capabilities of a provider (RFC "Provider interface")."""

    model_config = _STRICT

    id: str
    version: str
    healthy: bool
    capabilities: tuple[Literal["query", "store", "graph"], ...]
    consumer: str | None = None
    mode: Mode | None = None
    namespaces: tuple[str, ...] | None = None
    #: The passport sections recorded in this consumer's live grant (RFC "Permission model
    #: extension"); the passport owns their content, the provider reports and enforces the names.
    sections: tuple[str, ...] | None = None


class MemoryQuery(BaseModel):
    """``query()`` input (RFC ``MemoryQuery``), plus the optional byte budget of issue #8.

    ``namespaces`` empty means "every namespace the grant allows"; a namespace outside the grant
    is refused (RFC "Phase C notes"). ``consumer`` may be omitted: the consumer is the one the
    capability names (a name that differs is refused). ``text`` is an extension: records are
    matched and ranked by the same retrieval as ``saihm_recall`` (docs/retrieval.md) against
    the record's content, its string values and numbers, never JSON field names or the
    vault's own wrapper (:func:`records.ranked`).
    """

    model_config = _STRICT

    consumer: ConsumerName | None = None
    namespaces: tuple[Namespace, ...] = ()
    intent: Annotated[str, Field(max_length=256)] | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT
    max_bytes: Annotated[int, Field(ge=1)] | None = None
    text: Annotated[str, Field(max_length=1024)] | None = None


class MemoryRecord(BaseModel):
    """One record (RFC ``MemoryRecord``): a sealed cell of the vault holder.

    ``id`` is the cellId (hex); ``created_at`` is the cell timestamp; cells are immutable, so
    ``updated_at`` equals ``created_at``. Serialized, an optional field that is not set is
    absent, not ``null``.
    """

    model_config = _STRICT

    id: str
    namespace: str
    content: JsonValue
    confidence: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    verified_at: str | None = None
    sources: Annotated[int, Field(ge=0)] | None = None
    created_at: str
    updated_at: str

    _iso = field_validator("verified_at")(_check_iso)

    @model_serializer(mode="wrap")
    def _optional_means_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The RFC declares ``confidence?``, ``verified_at?`` and ``sources?``: one that is not
        set is left out (never ``null``) on every surface that serializes a record."""
        data: dict[str, Any] = handler(self)
        for name in OPTIONAL_RECORD_FIELDS:
            if data.get(name) is None:
                data.pop(name, None)
        return data


class MemoryExcerpt(BaseModel):
    """``query()`` output (RFC ``MemoryExcerpt``): filtered and size-bounded."""

    model_config = _STRICT

    records: tuple[MemoryRecord, ...]
    truncated: bool


class MemoryStore(BaseModel):
    """``store()`` input: one record to add (RFC "Confidence-based memory" metadata optional)."""

    model_config = _STRICT

    consumer: ConsumerName | None = None
    namespace: Namespace
    content: JsonValue
    confidence: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    verified_at: str | None = None
    sources: Annotated[int, Field(ge=0)] | None = None
    #: The id of the record this one replaces (a correction): forgotten in the same change
    #: when this record is stored (for a consumer's proposal, when the person accepts it).
    supersedes: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None

    _iso = field_validator("verified_at")(_check_iso)


class MemoryRecordRef(BaseModel):
    """``store()`` output. ``state="pending"``: held for the person (``id`` is a proposal id);
    ``state="stored"``: a live record (``id`` is its cellId)."""

    model_config = _STRICT

    id: str
    namespace: str
    state: Literal["pending", "stored"]
    created_at: str
    receipt_id: str | None = None


class GraphQuery(BaseModel):
    """``graph()`` input: optional start entity and depth over the visible records.

    ``consumer`` may be omitted: it is then the one the capability names.
    """

    model_config = _STRICT

    consumer: ConsumerName | None = None
    namespaces: tuple[Namespace, ...] = ()
    entity: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    depth: Annotated[int, Field(ge=0, le=4)] = 1
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT


class GraphNode(BaseModel):
    """An entity named by ``content.entity`` (or as a relation target) of a visible record."""

    model_config = _STRICT

    id: str
    type: str | None = None
    record_ids: tuple[str, ...] = ()


class GraphEdge(BaseModel):
    """A relation from ``content.relations`` of one visible record."""

    model_config = _STRICT

    source: str
    target: str
    relation: str
    record_id: str


class GraphExcerpt(BaseModel):
    """``graph()`` output; ``truncated`` when more nodes existed than ``limit``."""

    model_config = _STRICT

    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    truncated: bool


class MemoryGrantField(BaseModel):
    """The RFC's additive grant field ``memory``; ``mode`` omitted means no memory access."""

    model_config = _STRICT

    provider_id: str = PROVIDER_ID
    namespaces: tuple[Namespace, ...] = ()
    mode: Mode | None = None


class ConsumerGrant(BaseModel):
    """A consumer grant (RFC "Permission model extension")."""

    model_config = _STRICT

    provider: ConsumerName
    sections: tuple[str, ...] = ()
    memory: MemoryGrantField | None = None


class PendingProposal(BaseModel):
    """A consumer's held write proposal, as shown to the person (plaintext only on request)."""

    model_config = _STRICT

    id: str
    consumer: str
    proposed_at: str
    namespace: str | None = None
    record: dict[str, Any] | None = None


class MemoryContext(BaseModel):
    """The context-assembly block ``export(consumer)`` embeds (RFC "Passport Context assembly")."""

    model_config = _STRICT

    provider: str = PROVIDER_ID
    excerpt: MemoryExcerpt

    def block(self) -> dict[str, Any]:
        """``{"memory": {"provider": ..., "excerpt": {...}}}`` as JSON-ready data."""
        return {"memory": self.model_dump(mode="json")}
