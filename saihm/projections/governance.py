"""Governance: proposals, the first vote of each holder on each, and the tallies
(saihm-protocol "saihm_governance_propose", "saihm_governance_vote").

Not MAC-bound: these grant no access, and the tallies are published (``saihm verify``
recomputes them from the log).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from saihm.events.operations import Operation
from saihm.events.records import Body, ProposalRecord, Tally, Vote
from saihm.projections.keys import LeafView
from saihm.projections.tables import Handler, Projection, Txn

PROPOSALS = b"p_proposals"  # proposalId -> ProposalRecord
VOTES = b"p_votes"  # proposalId || holderId -> Vote
TALLIES = b"p_tallies"  # proposalId -> Tally


class Governance(Projection):
    """Proposals, votes and tallies."""

    DB_NAMES = (PROPOSALS, VOTES, TALLIES)

    __slots__ = ()

    # -- applying -------------------------------------------------------------------------

    def apply_propose(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """ "Where two PROPOSE receipts carry the same proposalId, the first in log order
        governs.\""""
        d = leaf.detail
        assert isinstance(d, dict)
        record = ProposalRecord(
            scope=d["scope"],
            param_key=d["paramKey"],
            proposed_value=d["proposedValue"],
            snapshot_epoch=d["snapshotEpoch"],
            proposer=leaf.holder_id,
            index=index,
            timestamp=leaf.timestamp,
        )
        self.t.put(txn, PROPOSALS, leaf.subject_id, record.encode(), overwrite=False)

    def apply_vote(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """Tallies count, per holder and proposal, only the first VOTE receipt in log order,
        and only on a proposal the log holds."""
        if self.t.raw(txn, PROPOSALS, leaf.subject_id) is None:
            return
        d = leaf.detail
        assert isinstance(d, dict)
        vote = Vote(approve=d["approve"], weight=d["weight"], cast_at=leaf.timestamp, index=index)
        key = leaf.subject_id + leaf.holder_id
        if not self.t.put(txn, VOTES, key, vote.encode(), overwrite=False):
            return
        tally = self.tally(txn, leaf.subject_id).counted(vote.approve, vote.weight)
        self.t.put(txn, TALLIES, leaf.subject_id, tally.encode())

    HANDLERS: ClassVar[Mapping[Operation, Handler]] = {
        Operation.PROPOSE: apply_propose,
        Operation.VOTE: apply_vote,
    }

    # -- queries --------------------------------------------------------------------------

    def proposal(self, txn: Txn, proposal_id: bytes) -> ProposalRecord | None:
        """The proposal, or None."""
        raw = self.t.get(txn, PROPOSALS, proposal_id)
        return None if raw is None else ProposalRecord.decode(raw)

    def proposals(self, txn: Txn) -> Iterator[tuple[bytes, ProposalRecord]]:
        """(proposalId, proposal) of every proposal, in proposalId order."""
        for key, value in self.t.items(txn, PROPOSALS):
            yield key, ProposalRecord.decode(value)

    def vote(self, txn: Txn, proposal_id: bytes, holder_id: bytes) -> Vote | None:
        """The holder's counted vote on the proposal, or None."""
        raw = self.t.get(txn, VOTES, proposal_id + holder_id)
        return None if raw is None else Vote.decode(raw)

    def tally(self, txn: Txn, proposal_id: bytes) -> Tally:
        """The weights counted for the proposal (all zero before its first vote)."""
        raw = self.t.get(txn, TALLIES, proposal_id)
        return Tally() if raw is None else Tally.decode(raw)
