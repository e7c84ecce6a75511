"""Typed results of every binding method (saihm-protocol "Tool surface", DESIGN.md "HTTP").

Python attributes are snake_case; the wire names (camelCase, and the protocol's few snake_case
names) are their aliases, and ``model_dump(by_alias=True)`` gives the wire form back. Numbers
accept a JSON number or a decimal string, booleans the protocol's eight forms, identifiers
only the result-identifier rule; an answer that breaks a required field is refused as
malformed (:class:`~saihm.client.errors.ClientError` ``kind="malformed"``). Fields the
operator adds beyond these are kept in ``model_extra`` and never relied on.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from saihm.client._wire import parse_bool, parse_number, result_identifier

__all__ = [
    "ContractAnswer",
    "ContractSummary",
    "Forgotten",
    "IncomingContract",
    "Proposal",
    "Proposed",
    "RecalledCell",
    "Recorded",
    "Remembered",
    "Revoked",
    "SessionForgotten",
    "Shared",
    "Status",
    "Voted",
]


def _number(value: Any) -> int | float:
    parsed = parse_number(value)
    if parsed is None:
        raise ValueError("not a protocol number")
    return parsed


def _bool(value: Any) -> bool:
    parsed = parse_bool(value)
    if parsed is None:
        raise ValueError("not a protocol boolean")
    return parsed


def _ident(value: Any) -> str:
    parsed = result_identifier(value)
    if parsed is None:
        raise ValueError("not a result identifier")
    return parsed


Number = Annotated[int | float, BeforeValidator(_number)]
Flag = Annotated[bool, BeforeValidator(_bool)]
Ident = Annotated[str, BeforeValidator(_ident)]


class Result(BaseModel):
    """Base of every result: camelCase aliases, extension fields kept, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True
    )


class Remembered(Result):
    """saihm_remember: ``cell_id`` names the new cell (the one saihm_forget needs)."""

    cell_id: Ident
    cell_nonce: str | None = None
    tier: str | None = None
    kek_version: Number | None = None
    epoch: Number | None = None
    signature_prefix: str | None = None
    receipt_id: Ident | None = None


class Recorded(Remembered):
    """saihm_record (extension): a record cell, chained in its session by ``seq``/``prev``."""

    kind: str | None = None
    seq: Number | None = None
    prev: Ident | None = None


class RecalledCell(Result):
    """One element of saihm_recall. ``kind`` and ``namespace`` are extension fields: "memory"
    for a stored fact, "said" / "did" / "end" for the host's record of the session.

    ``shared_by_other_holder`` is computed by the client (conformance item 9): true when
    ``holder_id_hex`` differs from the caller's holderId, or while that is unknown. ``score``
    (extension, docs/retrieval.md) is the operator's relevance for a recall with a query,
    higher is more relevant; ``None`` without a query. ``supersedes`` (extension) is the
    cellId of the cell this one replaced (``remember(..., supersedes=)``), ``None`` for a cell
    that replaced none. ``metadata`` (extension) is the structure its writer kept beside the
    text (``remember(..., metadata=)``, a JSON object), never part of ``plaintext``.
    """

    cell_id: Ident
    plaintext: str
    holder_id_hex: str | None = None
    cell_nonce: str | None = None
    kek_version: Number | None = None
    holder_signature_prefix: str | None = None
    timestamp: Number | None = None
    tier: str | None = None
    kind: str | None = None
    namespace: str | None = None
    session_id: str | None = None
    score: Number | None = None
    supersedes: Ident | None = None
    metadata: dict[str, Any] | None = None
    shared_by_other_holder: bool = True

    @property
    def is_record(self) -> bool:
        """Whether this is an entry of the host's record (what was said or done), not memory."""
        return self.kind in ("said", "did", "end")


class Forgotten(Result):
    """saihm_forget: ``success`` false means not found or already erased."""

    success: Flag
    cell_id: Ident | None = None
    destruction_anchor: Ident | None = None
    epoch: Number | None = None


class SessionForgotten(Result):
    """saihm_forget_session (extension): every cell of one session erased; receipts stay."""

    session_id: Ident
    erased: Number
    cell_ids: list[Ident] = []
    receipt_ids: list[Ident] = []


class ContractSummary(Result):
    """A contract the caller made, as saihm_status lists it."""

    contract_id: Ident
    mode: str | None = None
    grantee_ids: list[str] | None = None
    expires_at: Number | None = None


class IncomingContract(Result):
    """A contract naming the caller as grantee (saihm_status extension ``incomingContracts``)."""

    contract_id: Ident
    holder_id_hex: str | None = None
    mode: str | None = None
    accepted: Flag | None = None
    expires_at: Number | None = None


class Proposal(Result):
    """A governance proposal as saihm_status lists it."""

    prop_id: Ident = Field(alias="propId")
    scope: str | None = None
    opens_ts: Number | None = Field(default=None, alias="opens_ts")
    closes_ts: Number | None = Field(default=None, alias="closes_ts")
    tally_for: Number | None = Field(default=None, alias="tally_for")
    tally_against: Number | None = Field(default=None, alias="tally_against")
    tally_abstain: Number | None = Field(default=None, alias="tally_abstain")


class Status(Result):
    """saihm_status. ``agent_id_hash_hex`` is the caller's holderId (required here);
    ``token_expires_at`` (UNIX seconds) and ``token_sessions`` ("one" for a session token,
    "all" for a person's grant) describe the caller's token (operator extensions)."""

    agent_id_hash_hex: Ident
    custody: str | None = None
    prs: Number | None = None
    bfsi_window_start_ts: Number | None = Field(default=None, alias="bfsi_window_start_ts")
    bfsi_r: Number | None = Field(default=None, alias="bfsi_R")
    shards: dict[str, Number] | None = None
    contracts: list[ContractSummary] | None = None
    incoming_contracts: list[IncomingContract] | None = None
    governance: list[Proposal] | None = None
    session_id: str | None = None
    token_expires_at: Number | None = None
    token_sessions: str | None = None


class Shared(Result):
    """saihm_share: ``contract_id`` names the contract (the one saihm_revoke_share needs)."""

    contract_id: Ident
    type: str | None = None
    grantee_count: Number | None = None
    epoch: Number | None = None
    expires_at: Number | None = None
    receipt_id: Ident | None = None


class Revoked(Result):
    """saihm_revoke_share: only ``revoked`` true is a revocation (the client checks it)."""

    revoked: Flag
    epoch: Number | None = None
    receipt_id: Ident | None = None


class ContractAnswer(Result):
    """saihm_accept_contract / saihm_decline_contract (extension): the grantee's decision."""

    contract_id: Ident
    accepted: Flag
    receipt_id: Ident | None = None


class Proposed(Result):
    """saihm_governance_propose."""

    proposal_id: Ident
    scope: str | None = None
    param_key: str | None = None
    proposed_value: str | None = None
    snapshot_epoch: Number | None = None
    proposer_hash: Ident | None = None
    receipt_id: Ident | None = None


class Voted(Result):
    """saihm_governance_vote: the vote the operator recorded (which may be an earlier one)."""

    proposal_id: Ident | None = None
    voter_hash: Ident | None = None
    approve: Flag | None = None
    weight: Number | None = None
    cast_at_epoch: Number | None = None
    receipt_id: Ident | None = None
