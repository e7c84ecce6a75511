"""Proposal and vote bodies (saihm-protocol "saihm_governance_propose" / "..._vote").

These are the private bodies the operator keeps; the PROPOSE and VOTE receipt details
(``ProposeDetail``, ``VoteDetail``) are their public form.

Proposal: {1: proposalId, 2: holderId, 3: scope, 4: paramKey | null, 5: proposedValue | null,
6: snapshotEpoch, 7: timestamp, 8: proposalNonce}; proposalId is SHA-256 of the deterministic
CBOR of the map without key 1. Vote: {1: proposalId, 2: voterId, 3: approve, 4: weight,
5: timestamp}.
"""

from __future__ import annotations

import hashlib
import os
from typing import Annotated, Any, Self

from pydantic import Field, Strict

from saihm.errors import rejects
from saihm.events._types import FROZEN, U64, Id32, Nonce16, Record, Text, build, read_map
from saihm.events.codec import encode
from saihm.events.details import ProposeDetail

__all__ = ["Proposal"]


class Proposal(Record):
    """A governance proposal; build with ``Proposal.create`` so that the id is right."""

    model_config = FROZEN

    proposal_id: Id32
    holder_id: Id32
    scope: Annotated[str, Strict(), Field(min_length=1)]
    param_key: Text | None
    proposed_value: Text | None
    snapshot_epoch: U64
    timestamp: U64
    proposal_nonce: Nonce16

    @classmethod
    @rejects()
    def create(
        cls,
        *,
        holder_id: bytes,
        scope: str,
        param_key: str | None,
        proposed_value: str | None,
        snapshot_epoch: int,
        timestamp: int,
        proposal_nonce: bytes | None = None,
    ) -> Self:
        """A proposal with a fresh 16-byte nonce (unless given) and its computed id."""
        fields: dict[str, Any] = {
            "holder_id": holder_id,
            "scope": scope,
            "param_key": param_key,
            "proposed_value": proposed_value,
            "snapshot_epoch": snapshot_epoch,
            "timestamp": timestamp,
            "proposal_nonce": os.urandom(16) if proposal_nonce is None else proposal_nonce,
        }
        draft = cls(proposal_id=bytes(32), **fields)
        return cls(proposal_id=hashlib.sha256(encode(draft.unsigned_map())).digest(), **fields)

    def unsigned_map(self) -> dict[int, Any]:
        return {
            2: self.holder_id,
            3: self.scope,
            4: self.param_key,
            5: self.proposed_value,
            6: self.snapshot_epoch,
            7: self.timestamp,
            8: self.proposal_nonce,
        }

    @rejects()
    def detail(self) -> ProposeDetail:
        """The public PROPOSE receipt detail."""
        return ProposeDetail(
            scope=self.scope,
            param_key=self.param_key,
            proposed_value=self.proposed_value,
            snapshot_epoch=self.snapshot_epoch,
        )

    def to_cbor(self) -> bytes:
        m = self.unsigned_map()
        m[1] = self.proposal_id
        return encode(m)

    @classmethod
    @rejects()
    def from_cbor(cls, data: bytes) -> Self:
        """Strictly decode a proposal map; raises ``DecodeError`` (the id is not checked)."""
        m = read_map(data, "proposal", set(range(1, 9)))
        return build(
            cls,
            "proposal",
            proposal_id=m[1],
            holder_id=m[2],
            scope=m[3],
            param_key=m[4],
            proposed_value=m[5],
            snapshot_epoch=m[6],
            timestamp=m[7],
            proposal_nonce=m[8],
        )
