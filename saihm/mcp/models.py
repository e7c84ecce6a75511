"""Structured content of each tool: one pydantic model per tool result.

Every model carries ``status`` (what the client concluded), ``detail`` (client-written text),
and, after a failure, ``httpStatus`` and ``errorCode``. An absent or unusable field is
``null``; it is never replaced by a default that reads as a value (conformance item 6).
The statuses shared by all tools are "not_sent" (refused or never delivered), "failed"
(a failure status or a redirect) and "unknown" (no usable response: the operator may or may
not have acted).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ContractSummary",
    "ForgetResult",
    "IncomingContractSummary",
    "ProposalSummary",
    "ProposeResult",
    "RecallResult",
    "RecalledCell",
    "RememberResult",
    "RevokeResult",
    "ShareResult",
    "StatusResult",
    "ToolResult",
    "VoteResult",
]

Number = int | float
_Transport = Literal["not_sent", "failed", "unknown"]


class ToolResult(BaseModel):
    """Fields every tool result has."""

    model_config = ConfigDict(extra="forbid")

    status: str
    detail: str | None = None
    httpStatus: int | None = None
    errorCode: str | None = None
    receiptId: str | None = None
    advice: str | None = None


class RememberResult(ToolResult):
    status: Literal["stored", "unconfirmed"] | _Transport
    cellId: str | None = None
    cellNonce: str | None = None
    tier: str | None = None
    kekVersion: Number | None = None
    epoch: Number | None = None
    signaturePrefix: str | None = None


class RecalledCell(BaseModel):
    """One recalled cell. ``plaintext`` is exactly what the operator sent."""

    model_config = ConfigDict(extra="forbid")

    cellId: str
    plaintext: str | None
    holderIdHex: str | None = None
    sharedByOtherHolder: bool
    cellNonce: str | None = None
    kekVersion: Number | None = None
    holderSignaturePrefix: str | None = None
    timestamp: Number | None = None
    #: ``timestamp`` as an ISO 8601 UTC date and time (what the report prints).
    writtenAt: str | None = None
    tier: str | None = None
    # Extension fields (DESIGN.md "HTTP"): "memory", or "said" / "did" / "end" for the host's
    # record of the session; the namespace the cell was written to.
    kind: str | None = None
    namespace: str | None = None
    #: Extension field: the cellId of the fact this cell replaced (``saihm_remember`` with
    #: ``supersedes``), checked as a result identifier.
    supersedes: str | None = None


class RecallResult(ToolResult):
    status: (
        Literal["ok", "nothing_matched", "empty", "malformed", "not_custodial", "incomplete"]
        | _Transport
    )
    callerIdKnown: bool = False
    cells: list[RecalledCell] | None = None
    cellsWithoutPlaintext: int | None = None


class ForgetResult(ToolResult):
    status: (
        Literal["erased", "not_found_or_already_erased", "unconfirmed", "refused", "mismatch"]
        | _Transport
    )
    requestedId: str
    cellId: str | None = None
    destructionAnchor: str | None = None
    epoch: Number | None = None


class ContractSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    contractId: str | None = None
    mode: str | None = None
    granteeIds: list[str] | None = None
    expiresAt: Number | None = None


class IncomingContractSummary(BaseModel):
    """A contract naming the caller as grantee (status extension ``incomingContracts``)."""

    model_config = ConfigDict(extra="forbid")

    contractId: str | None = None
    holderIdHex: str | None = None
    mode: str | None = None
    accepted: bool | None = None
    expiresAt: Number | None = None


class ProposalSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    propId: str | None = None
    scope: str | None = None
    opens_ts: Number | None = None
    closes_ts: Number | None = None
    tally_for: Number | None = None
    tally_against: Number | None = None
    tally_abstain: Number | None = None


class StatusResult(ToolResult):
    """``agentIdHashHex`` is ``null`` when not reported, never an empty string."""

    status: Literal["ok", "malformed"] | _Transport
    agentIdHashHex: str | None = None
    custody: str | None = None
    prs: Number | None = None
    bfsi_window_start_ts: Number | None = None
    bfsi_R: Number | None = None
    shards: dict[str, Number] | None = None
    contracts: list[ContractSummary] | None = None
    contractCount: int | None = None
    incomingContracts: list[IncomingContractSummary] | None = None
    incomingContractCount: int | None = None
    governance: list[ProposalSummary] | None = None
    governanceCount: int | None = None
    # Extension fields: when the caller's token stops being accepted, and whether it is a
    # session token ("one") or a person's holder-wide grant ("all"); ``tokenExpiresAtUtc`` is
    # the same instant in ISO 8601.
    tokenExpiresAt: Number | None = None
    tokenExpiresAtUtc: str | None = None
    tokenSessions: str | None = None
    sessionId: str | None = None


class ShareResult(ToolResult):
    status: Literal["shared", "unconfirmed"] | _Transport
    contractId: str | None = None
    type: str | None = None
    granteeCount: Number | None = None
    requestedGranteeCount: int
    granteeCountMismatch: bool | None = None
    epoch: Number | None = None


class RevokeResult(ToolResult):
    status: Literal["revoked", "unconfirmed"] | _Transport
    requestedContractId: str
    revoked: bool | None = None
    epoch: Number | None = None


class ProposeResult(ToolResult):
    status: Literal["proposed", "unconfirmed"] | _Transport
    proposalId: str | None = None
    scope: str | None = None
    paramKey: str | None = None
    proposedValue: str | None = None
    snapshotEpoch: Number | None = None
    proposerHash: str | None = None


class VoteResult(ToolResult):
    """ "not_counted" after a failure status; "unknown" when there is no usable response."""

    status: Literal[
        "recorded", "unconfirmed", "mismatch", "zero_weight", "not_counted", "unknown", "not_sent"
    ]
    requestedProposalId: str
    requestedApprove: bool
    proposalId: str | None = None
    voterHash: str | None = None
    approve: bool | None = None
    weight: Number | None = None
    castAtEpoch: Number | None = None
