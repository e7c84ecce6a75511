"""Capability tokens (DESIGN.md "Capabilities"): what a bearer may see, signed by the authority.

CBOR {1: holderId, 2: sessionId | null, 3: scope, 4: expiresAt, 5: tokenId, 6: signature};
scope is {1: sessions, 2: namespaces | null, 3: grantId | null, 4: consumer | null,
5: mode | null}. The signed bytes are the map without key 6, with ML-DSA-65 context
"SAIHM-CAPABILITY-v1" under the authority key (never a holder key). The token string is the
base64url encoding, without padding, of the full map.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Literal, Self

from pydantic import Field, Strict, model_validator

from saihm.errors import rejects
from saihm.events._types import (
    FROZEN,
    U64,
    Id32,
    Name,
    Nonce16,
    Record,
    Signature65,
    build,
    check_map,
    need,
)
from saihm.events._types import read_map as _read_map
from saihm.events.codec import encode
from saihm.events.errors import CapabilityError, DecodeError

__all__ = [
    "HEADER_FIELD_MAX",
    "ISSUABLE_TOKEN_CHARS",
    "MAX_TOKEN_CHARS",
    "Capability",
    "CapabilityScope",
]

#: Longest token string accepted (the signature alone is 3309 bytes, about 4412 characters).
MAX_TOKEN_CHARS = 8192
#: Longest header line (name, ": " and value) the server's HTTP parser reads (saihm.http.guard);
#: a longer one is refused with 431 before any handler runs.
HEADER_FIELD_MAX = 8190
#: Longest token the authority issues: one that fits ``Authorization: Bearer <token>`` within
#: ``HEADER_FIELD_MAX``, so every token issued can be presented to a server.
ISSUABLE_TOKEN_CHARS = HEADER_FIELD_MAX - len("Authorization: Bearer ")
_B64URL = re.compile(r"^[A-Za-z0-9_-]+$")
Namespace = Annotated[str, Strict(), Field(min_length=1, max_length=256)]


class CapabilityScope(Record):
    """What a token may see.

    - ``sessions="one"``: the session default; the token's ``session_id`` is that session.
    - ``sessions="all"``: a holder-wide grant a person made, optionally limited to
      ``namespaces``; ``grant_id`` names the grant so that revoking it (UNGRANT) kills the token.
    - ``consumer``/``mode``: a Memory Provider consumer grant (namespaces and read/write mode);
      the two are given together or not at all.
    """

    model_config = FROZEN

    sessions: Literal["one", "all"] = "one"
    namespaces: tuple[Namespace, ...] | None = None
    grant_id: Id32 | None = None
    consumer: Name | None = None
    mode: Literal["read", "write", "readwrite"] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if (self.consumer is None) != (self.mode is None):
            raise ValueError("consumer and mode are given together or not at all")
        if self.sessions == "one" and self.grant_id is not None:
            raise ValueError("a session-only scope has no grant id")
        if self.sessions == "all" and self.grant_id is None:
            raise ValueError("a holder-wide scope names the grant that made it")
        return self

    def to_map(self) -> dict[int, Any]:
        ns = None if self.namespaces is None else list(self.namespaces)
        return {1: self.sessions, 2: ns, 3: self.grant_id, 4: self.consumer, 5: self.mode}

    @classmethod
    @rejects()
    def from_map(cls, obj: Any) -> Self:
        m = check_map(obj, "capability scope", set(range(1, 6)))
        ns = m[2] if m[2] is None else tuple(need(m[2], list, "capability namespaces"))
        return build(
            cls,
            "capability scope",
            sessions=m[1],
            namespaces=ns,
            grant_id=m[3],
            consumer=m[4],
            mode=m[5],
        )


class Capability(Record):
    """A signed capability. Build with ``saihm.events.signing.sign_capability``."""

    model_config = FROZEN

    holder_id: Id32
    session_id: Id32 | None
    scope: CapabilityScope
    expires_at: U64
    token_id: Nonce16
    signature: Signature65

    @model_validator(mode="after")
    def _session_present(self) -> Self:
        if self.scope.sessions == "one" and self.session_id is None:
            raise ValueError("a session-only capability names its session")
        return self

    def unsigned_map(self) -> dict[int, Any]:
        """The map without key 6 (signature): what the authority signs."""
        return {
            1: self.holder_id,
            2: self.session_id,
            3: self.scope.to_map(),
            4: self.expires_at,
            5: self.token_id,
        }

    def to_cbor(self) -> bytes:
        m = self.unsigned_map()
        m[6] = self.signature
        return encode(m)

    @classmethod
    @rejects()
    def from_cbor(cls, data: bytes) -> Self:
        """Strictly decode a capability map; raises ``DecodeError``."""
        m = _read_map(data, "capability", set(range(1, 7)))
        return build(
            cls,
            "capability",
            holder_id=m[1],
            session_id=m[2],
            scope=CapabilityScope.from_map(m[3]),
            expires_at=m[4],
            token_id=m[5],
            signature=m[6],
        )

    def to_token(self) -> str:
        """The bearer token: base64url without padding of ``to_cbor()``."""
        return base64.urlsafe_b64encode(self.to_cbor()).rstrip(b"=").decode("ascii")

    @classmethod
    @rejects()
    def from_token(cls, token: str) -> Self:
        """Parse a bearer token strictly; raises ``CapabilityError`` (401) on any defect.

        The token is checked for shape only; ``verify_capability`` checks signature and expiry.
        The message never echoes the token.
        """
        if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
            raise CapabilityError("malformed token", code="invalid_token")
        if not _B64URL.match(token) or len(token) % 4 == 1:
            raise CapabilityError("malformed token", code="invalid_token")
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError) as err:
            raise CapabilityError("malformed token", code="invalid_token") from err
        # Reject non-canonical base64 (stray low bits in the last character).
        if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != token:
            raise CapabilityError("malformed token", code="invalid_token")
        try:
            return cls.from_cbor(raw)
        except DecodeError as err:
            raise CapabilityError("malformed token", code="invalid_token") from err
