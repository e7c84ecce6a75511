"""The governance family of the binding: saihm_governance_propose and saihm_governance_vote,
over ``operator.governance`` (:class:`saihm.operator.governance.GovernanceTools`); refused
with ``governance_disabled`` where the operator runs without governance
(:attr:`Method.governance <saihm.events.operations.Method>`).

Each method's params parser, renderer (the tool's "Result") and :class:`Binding` row live
here together; :data:`ROWS` is what :mod:`saihm.protocol.binding` gathers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from saihm.errors import ErrorCode, MalformedInput
from saihm.events.operations import METHODS
from saihm.operator.governance import SCOPES, TERM_MAX, Proposed, Voted
from saihm.protocol import params as P
from saihm.protocol.family import Binding, plain
from saihm.protocol.params import dec, hx

if TYPE_CHECKING:
    from saihm.config import Config

__all__ = ["ROWS", "render_proposed", "render_voted"]


# -- params ----------------------------------------------------------------------------------


def _propose_params(params: dict[str, Any], config: Config) -> tuple[str, str | None, str | None]:
    p = P.check_params(params, {"scope", "paramKey", "proposedValue"}, {"scope"})
    scope = P.text(p, "scope", code=ErrorCode.UNKNOWN_SCOPE)
    if scope not in SCOPES:
        raise MalformedInput("unknown proposal scope", code=ErrorCode.UNKNOWN_SCOPE)
    key = P.text(p, "paramKey", nullable=True)
    value = P.text(p, "proposedValue", nullable=True)
    # Both go into the PROPOSE receipt, a log leaf (under 64 KiB); governable values are
    # short, so a bound here refuses what would otherwise fail inside the write.
    if any(v is not None and len(v) > TERM_MAX for v in (key, value)):
        raise MalformedInput(f"paramKey and proposedValue are at most {TERM_MAX} characters")
    if scope == "protocol_upgrade":
        key = value = None
    elif key not in config.governable or value is None:
        raise MalformedInput("paramKey is not governable here", code=ErrorCode.UNKNOWN_PARAM)
    return scope, key, value


def _vote_params(params: dict[str, Any], config: Config) -> tuple[bytes, bool]:
    p = P.check_params(params, {"proposalId", "approve"}, {"proposalId", "approve"})
    proposal_id = P.id32(p.get("proposalId"), code=ErrorCode.PROPOSAL_NOT_FOUND, what="proposalId")
    return proposal_id, P.boolean(p.get("approve"), "approve")


# -- results ---------------------------------------------------------------------------------


def render_proposed(r: Proposed) -> dict[str, object]:
    """saihm_governance_propose "Result"."""
    return {
        "proposalId": hx(r.proposal_id),
        "scope": r.scope,
        "paramKey": r.param_key,
        "proposedValue": r.proposed_value,
        "snapshotEpoch": dec(r.snapshot_epoch),
        "proposerHash": hx(r.proposer),
        "receiptId": hx(r.receipt_id),
    }


def render_voted(r: Voted) -> dict[str, object]:
    """saihm_governance_vote "Result"; a repeat (the vote recorded first) has no receipt."""
    out: dict[str, object] = {
        "proposalId": hx(r.proposal_id),
        "voterHash": hx(r.voter),
        "approve": r.approve,
        "weight": dec(r.weight),
        "castAtEpoch": dec(r.cast_at),
    }
    if r.receipt_id is not None:
        out["receiptId"] = hx(r.receipt_id)
    return out


# -- the rows --------------------------------------------------------------------------------

ROWS: tuple[Binding[Any, Any], ...] = (
    Binding(
        METHODS["saihm_governance_propose"],
        _propose_params,
        lambda op, access, a: op.governance.propose(access, *a),
        plain(render_proposed),
    ),
    Binding(
        METHODS["saihm_governance_vote"],
        _vote_params,
        lambda op, access, a: op.governance.vote(access, *a),
        plain(render_voted),
    ),
)
