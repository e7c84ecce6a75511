"""Governance (saihm-protocol "saihm_governance_propose", "saihm_governance_vote",
"Governance form"): an operator option, with its published form."""

from __future__ import annotations

from typing import Any

from saihm import params as P
from saihm.errors import Conflict, MalformedInput, NotFound, NotPermitted
from saihm.events import Operation, Proposal
from saihm.events.details import ProposeDetail, VoteDetail
from saihm.events.signing import sign_receipt
from saihm.projections import Vote
from saihm.store import Access, Change
from saihm.toolbase import ToolBase

SCOPES = ("emission_param", "protocol_upgrade")
#: Longest paramKey or proposedValue accepted.
TERM_MAX = 256


class GovernanceTools(ToolBase):
    """saihm_governance_propose, saihm_governance_vote, tallies and the governance form."""

    def _proposals(self, txn: Any) -> list[dict]:
        out = []
        governance = self.store.projections.governance
        for pid, prop in governance.proposals(txn):
            tally = governance.tally(txn, pid)
            out.append(
                {
                    "propId": P.hx(pid),
                    "scope": prop.scope,
                    "paramKey": prop.param_key,
                    "proposedValue": prop.proposed_value,
                    "opens_ts": P.dec(prop.snapshot_epoch),
                    "closes_ts": P.dec(prop.snapshot_epoch + self.config.voting_window),
                    "tally_for": P.dec(tally.votes_for),
                    "tally_against": P.dec(tally.votes_against),
                    "tally_abstain": P.dec(tally.votes_abstain),
                }
            )
        return out

    def _propose(self, access: Access, params: object) -> dict:
        p = P.check_params(params, {"scope", "paramKey", "proposedValue"}, {"scope"})
        scope = P.text(p, "scope", code="unknown_scope")
        if scope not in SCOPES:
            raise MalformedInput("unknown proposal scope", code="unknown_scope")
        key = P.text(p, "paramKey", nullable=True)
        value = P.text(p, "proposedValue", nullable=True)
        # Both go into the PROPOSE receipt, a log leaf (under 64 KiB); governable values are
        # short, so a bound here refuses what would otherwise fail inside the write.
        if any(v is not None and len(v) > TERM_MAX for v in (key, value)):
            raise MalformedInput(f"paramKey and proposedValue are at most {TERM_MAX} characters")
        if scope == "protocol_upgrade":
            key = value = None
        elif key not in self.config.governable or value is None:
            raise MalformedInput("paramKey is not governable here", code="unknown_param")
        return self.propose(access, scope, key, value)

    def propose(self, access: Access, scope: str, key: str | None, value: str | None) -> dict:
        """Open a proposal with a snapshot epoch and log PROPOSE (eligibility: any holder)."""
        now = self._now()
        # proposalId = SHA-256 of the proposal (proposer, terms, snapshot, a fresh nonce).
        proposal_id = Proposal.create(
            holder_id=access.holder_id, scope=scope, param_key=key, proposed_value=value,
            snapshot_epoch=now, timestamp=now,
        ).proposal_id  # fmt: skip
        detail = ProposeDetail(scope=scope, param_key=key, proposed_value=value, snapshot_epoch=now)
        receipt = sign_receipt(
            self._key(access), subject_id=proposal_id, operation=Operation.PROPOSE,
            timestamp=now, detail=detail,
        )  # fmt: skip
        self._commit(Change(receipts=[receipt]))
        return {
            "proposalId": P.hx(proposal_id), "scope": scope, "paramKey": key,
            "proposedValue": value, "snapshotEpoch": P.dec(now),
            "proposerHash": P.hx(access.holder_id), "receiptId": P.hx(receipt.receipt_id),
        }  # fmt: skip

    def _vote(self, access: Access, params: object) -> dict:
        p = P.check_params(params, {"proposalId", "approve"}, {"proposalId", "approve"})
        proposal_id = P.id32(p.get("proposalId"), code="proposal_not_found", what="proposalId")
        return self.vote(access, proposal_id, P.boolean(p.get("approve"), "approve"))

    def vote(self, access: Access, proposal_id: bytes, approve: bool) -> dict:
        """Count the first vote per holder; a repeat returns the recorded vote, no receipt.

        Weight: 1 for each holder whose KEY receipt precedes the proposal in the log (the
        published vote-weight function, evaluated at the snapshot).
        """
        holder = access.holder_id
        records = self.store.projections
        with self.store.read_txn() as txn:
            prop = records.governance.proposal(txn, proposal_id)
            if prop is None:
                raise NotFound("no such proposal", code="proposal_not_found")
            existing = records.governance.vote(txn, proposal_id, holder)
            key_record = records.holders.get(txn, holder)
        if existing is not None:
            return self._recorded_vote(proposal_id, holder, existing)
        if self._now() > prop.snapshot_epoch + self.config.voting_window:
            raise Conflict("the voting window has closed", code="proposal_closed")
        if key_record is None or key_record.index > prop.index:
            raise NotPermitted("the voter held no key at the snapshot", code="ineligible_voter")
        now = self._now()
        receipt = sign_receipt(
            self._key(access), subject_id=proposal_id, operation=Operation.VOTE,
            timestamp=now, detail=VoteDetail(approve=approve, weight=1),
        )  # fmt: skip

        def guard(txn: Any) -> object:
            recorded = records.governance.vote(txn, proposal_id, holder)
            return None if recorded is None else self._recorded_vote(proposal_id, holder, recorded)

        change = self._commit(Change(receipts=[receipt], guard=guard))
        if change.outcome is not None:
            return change.outcome
        result = self._vote_result(proposal_id, holder, approve, 1, now)
        result["receiptId"] = P.hx(receipt.receipt_id)
        return result

    @staticmethod
    def _vote_result(
        proposal_id: bytes, holder: bytes, approve: bool, weight: int, cast_at: int
    ) -> dict:
        return {
            "proposalId": P.hx(proposal_id),
            "voterHash": P.hx(holder),
            "approve": approve,
            "weight": P.dec(weight),
            "castAtEpoch": P.dec(cast_at),
        }

    @classmethod
    def _recorded_vote(cls, proposal_id: bytes, holder: bytes, vote: Vote) -> dict:
        return cls._vote_result(proposal_id, holder, vote.approve, vote.weight, vote.cast_at)

    def governance_form(self) -> dict:
        """The governance form the protocol requires an operator to publish."""
        return {
            "enabled": self.config.governance,
            "eligibilityToPropose": "any holder whose KEY receipt is in the log",
            "eligibilityToVote": "any holder whose KEY receipt precedes the PROPOSE receipt",
            "voteWeight": "1 per eligible holder, evaluated at the proposal's snapshot",
            "threshold": "tally_for greater than tally_against when the window closes",
            "votingWindowSeconds": self.config.voting_window,
            "scopes": {
                "emission_param": dict(self.config.governable),
                "protocol_upgrade": "adopt a revision of this operator's implementation",
            },
            "tallyRule": "first VOTE receipt per holder and proposal in log order",
        }
