"""The request bodies of the authority service (docs/authority.md "Calls"): strict pydantic
models that refuse unknown fields, wrong types, malformed ids and lifetimes out of range."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

__all__ = [
    "TTL_MAX",
    "Body",
    "GrantBody",
    "GrantRevokeBody",
    "HolderBody",
    "PersonLinkBody",
    "RenewBody",
    "RevokeBody",
    "SessionBody",
]

#: The longest lifetime a call may ask for (ten years).
TTL_MAX = 10 * 365 * 86_400

Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{64}$")]
Hex32 = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{32}$")]
Ttl = Annotated[int, Field(gt=0, le=TTL_MAX, strict=True)]


class Body(BaseModel):
    """Base of every body: no field beyond the declared ones, no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class HolderBody(Body):
    """``POST /v1/holders``."""

    ttl: Ttl | None = None


class SessionBody(Body):
    """``POST /v1/sessions``."""

    holderId: Hex64
    ttl: Ttl | None = None


class RenewBody(Body):
    """``POST /v1/sessions/renew``."""

    holderId: Hex64
    sessionId: Hex64
    ttl: Ttl | None = None


class RevokeBody(Body):
    """``POST /v1/sessions/revoke``: exactly one of ``sessionId`` and ``tokenId``."""

    holderId: Hex64
    sessionId: Hex64 | None = None
    tokenId: Hex32 | None = None


class GrantBody(Body):
    """``POST /v1/grants``; ``namespaces`` absent or null for every namespace. Each is checked
    as a name by the grant itself (``bad_namespace``, saihm.authority.actions.grant_scope)."""

    holderId: Hex64
    namespaces: Annotated[list[str], Field(min_length=1, max_length=64)] | None = None
    ttl: Ttl | None = None


class GrantRevokeBody(Body):
    """``POST /v1/grants/revoke``."""

    grantId: Hex64


class PersonLinkBody(Body):
    """``POST /v1/person-links``: a one-time link of at most a day (default a day)."""

    holderId: Hex64
    ttl: Annotated[int, Field(gt=0, le=86_400, strict=True)] | None = None
