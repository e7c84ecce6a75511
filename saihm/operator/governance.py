"""Governance (saihm-protocol "saihm_governance_propose", "saihm_governance_vote",
"Governance form"): an operator option, with its published form.

Operations return :class:`Proposed` and :class:`Voted`; :mod:`saihm.protocol` parses
their params and renders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from saihm.errors import Conflict, ErrorCode, NotFound, NotPermitted
from saihm.events import Operation, Proposal
from saihm.events.details import ProposeDetail, VoteDetail
from saihm.events.signing import sign_receipt
from saihm.operator.context import ToolContext
from saihm.projections import Vote
from saihm.storage import WriteTxn
from saihm.store import Access, Change, Questions

__all__ = ["SCOPES", "TERM_MAX", "GovernanceTools", "ProposalSummary", "Proposed", "Voted"]

SCOPES = ("emission_param", "protocol_upgrade")
#: Longest paramKey or proposedValue accepted.
TERM_MAX = 256


@dataclass(frozen=True, slots=True)
class ProposalSummary:
    """One proposal with its tally so far (status ``governance``)."""

    proposal_id: bytes
    scope: str
    param_key: str | None
    proposed_value: str | None
    opens: int
    closes: int
    tally_for: int
    tally_against: int
    tally_abstain: int


@dataclass(frozen=True, slots=True)
class Proposed:
    """An open proposal (saihm_governance_propose "Result")."""

    proposal_id: bytes
    scope: str
    param_key: str | None
    proposed_value: str | None
    snapshot_epoch: int
    proposer: bytes
    receipt_id: bytes


@dataclass(frozen=True, slots=True)
class Voted:
    """A counted vote (saihm_governance_vote "Result"); ``receipt_id`` None for a repeat,
    which returns the vote recorded first."""

    proposal_id: bytes
    voter: bytes
    approve: bool
    weight: int
    cast_at: int
    receipt_id: bytes | None = None


class GovernanceTools:
    """saihm_governance_propose, saihm_governance_vote, tallies and the governance form, over
    one :class:`ToolContext`."""

    def __init__(self, context: ToolContext) -> None:
        self.context = context

    def proposals(self, q: Questions) -> list[ProposalSummary]:
        """Every proposal in ``q``'s snapshot with its tally so far, in the projection's
        order (saihm_status ``governance``); ``closes`` is the snapshot plus the voting
        window."""
        out = []
        window = self.context.config.voting_window
        for pid, prop in q.proposals():
            tally = q.tally(pid)
            out.append(
                ProposalSummary(
                    pid,
                    prop.scope,
                    prop.param_key,
                    prop.proposed_value,
                    prop.snapshot_epoch,
                    prop.snapshot_epoch + window,
                    tally.votes_for,
                    tally.votes_against,
                    tally.votes_abstain,
                )
            )
        return out

    def propose(self, access: Access, scope: str, key: str | None, value: str | None) -> Proposed:
        """Open a proposal with a snapshot epoch and log PROPOSE (eligibility: any holder;
        saihm-protocol "saihm_governance_propose"). The binding checked the scope, the
        governable key and the bounds (``TERM_MAX``)."""
        ctx = self.context
        now = ctx.now()
        # proposalId = SHA-256 of the proposal (proposer, terms, snapshot, a fresh nonce).
        proposal_id = Proposal.create(
            holder_id=access.holder_id,
            scope=scope,
            param_key=key,
            proposed_value=value,
            snapshot_epoch=now,
            timestamp=now,
        ).proposal_id
        detail = ProposeDetail(scope=scope, param_key=key, proposed_value=value, snapshot_epoch=now)
        receipt = sign_receipt(
            ctx.key(access),
            subject_id=proposal_id,
            operation=Operation.PROPOSE,
            timestamp=now,
            detail=detail,
        )
        ctx.commit(Change(receipts=[receipt]))
        return Proposed(
            proposal_id=proposal_id,
            scope=scope,
            param_key=key,
            proposed_value=value,
            snapshot_epoch=now,
            proposer=access.holder_id,
            receipt_id=receipt.receipt_id,
        )

    def vote(self, access: Access, proposal_id: bytes, approve: bool) -> Voted:
        """Count the first vote per holder; a repeat returns the recorded vote, no receipt.

        Weight: 1 for each holder whose KEY receipt precedes the proposal in the log (the
        published vote-weight function, evaluated at the snapshot).
        """
        ctx = self.context
        holder = access.holder_id
        with ctx.store.questions() as q:
            prop = q.proposal(proposal_id)
            if prop is None:
                raise NotFound("no such proposal", code=ErrorCode.PROPOSAL_NOT_FOUND)
            existing = q.vote(proposal_id, holder)
            key_record = q.holder(holder)
        if existing is not None:
            return _recorded_vote(proposal_id, holder, existing)
        if ctx.now() > prop.snapshot_epoch + ctx.config.voting_window:
            raise Conflict("the voting window has closed", code=ErrorCode.PROPOSAL_CLOSED)
        if key_record is None or key_record.index > prop.index:
            raise NotPermitted(
                "the voter held no key at the snapshot", code=ErrorCode.INELIGIBLE_VOTER
            )
        now = ctx.now()
        receipt = sign_receipt(
            ctx.key(access),
            subject_id=proposal_id,
            operation=Operation.VOTE,
            timestamp=now,
            detail=VoteDetail(approve=approve, weight=1),
        )

        def guard(txn: WriteTxn) -> object:
            recorded = ctx.store.ask(txn).vote(proposal_id, holder)
            return None if recorded is None else _recorded_vote(proposal_id, holder, recorded)

        change = ctx.commit(Change(receipts=[receipt], guard=guard))
        if isinstance(change.outcome, Voted):
            return change.outcome
        return Voted(proposal_id, holder, approve, 1, now, receipt.receipt_id)

    def governance_form(self) -> dict[str, object]:
        """The governance form the protocol requires an operator to publish
        (saihm-protocol "Governance form")."""
        config = self.context.config
        return {
            "enabled": config.governance,
            "eligibilityToPropose": "any holder whose KEY receipt is in the log",
            "eligibilityToVote": "any holder whose KEY receipt precedes the PROPOSE receipt",
            "voteWeight": "1 per eligible holder, evaluated at the proposal's snapshot",
            "threshold": "tally_for greater than tally_against when the window closes",
            "votingWindowSeconds": config.voting_window,
            "scopes": {
                "emission_param": dict(config.governable),
                "protocol_upgrade": "adopt a revision of this operator's implementation",
            },
            "tallyRule": "first VOTE receipt per holder and proposal in log order",
        }


def _recorded_vote(proposal_id: bytes, holder: bytes, vote: Vote) -> Voted:
    return Voted(proposal_id, holder, vote.approve, vote.weight, vote.cast_at)
