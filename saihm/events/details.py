"""Receipt details: the public forms of PROPOSE, VOTE and GRANT (saihm-protocol "Wire formats").

These maps use text keys, as the protocol writes them; absent optional values are CBOR null.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Field, Strict

from saihm.errors import rejects
from saihm.events._types import FROZEN, U64, Bool, Record, Text, build, check_map, need

__all__ = ["GrantDetail", "ProposeDetail", "VoteDetail"]


class ProposeDetail(Record):
    """PROPOSE receipt detail: {"scope", "paramKey", "proposedValue", "snapshotEpoch"}."""

    model_config = FROZEN

    scope: Annotated[str, Strict(), Field(min_length=1)]
    param_key: Text | None
    proposed_value: Text | None
    snapshot_epoch: U64

    def to_map(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "paramKey": self.param_key,
            "proposedValue": self.proposed_value,
            "snapshotEpoch": self.snapshot_epoch,
        }

    @classmethod
    @rejects()
    def from_map(cls, obj: Any) -> Self:
        keys = {"scope", "paramKey", "proposedValue", "snapshotEpoch"}
        m = check_map(obj, "propose detail", keys)
        return build(
            cls,
            "propose detail",
            scope=m["scope"],
            param_key=m["paramKey"],
            proposed_value=m["proposedValue"],
            snapshot_epoch=m["snapshotEpoch"],
        )


class VoteDetail(Record):
    """VOTE receipt detail: {"approve": bool, "weight": uint}."""

    model_config = FROZEN

    approve: Bool
    weight: U64

    def to_map(self) -> dict[str, Any]:
        return {"approve": self.approve, "weight": self.weight}

    @classmethod
    @rejects()
    def from_map(cls, obj: Any) -> Self:
        m = check_map(obj, "vote detail", {"approve", "weight"})
        return build(cls, "vote detail", approve=m["approve"], weight=m["weight"])


class GrantDetail(Record):
    """GRANT receipt detail (extension): {"sessions": "all", "namespaces", "expiresAt"}."""

    model_config = FROZEN

    sessions: Literal["all"] = "all"
    namespaces: tuple[Annotated[str, Strict(), Field(min_length=1)], ...] | None
    expires_at: U64

    def to_map(self) -> dict[str, Any]:
        ns = None if self.namespaces is None else list(self.namespaces)
        return {"sessions": self.sessions, "namespaces": ns, "expiresAt": self.expires_at}

    @classmethod
    @rejects()
    def from_map(cls, obj: Any) -> Self:
        m = check_map(obj, "grant detail", {"sessions", "namespaces", "expiresAt"})
        ns = m["namespaces"]
        if ns is not None:
            ns = tuple(need(ns, list, "grant detail namespaces"))
        return build(
            cls, "grant detail", sessions=m["sessions"], namespaces=ns, expires_at=m["expiresAt"]
        )
