"""Public state derived from receipts alone: the erasure list and governance tallies.

These mirror the operator's projections (saihm/projections/apply.py) but are written again from
the protocol text, so that a verifier does not trust the code it checks:

- erasure list (saihm-protocol "Erasure"): every cellId named by a FORGET receipt, with the
  index of the first such receipt;
- tallies (saihm-protocol "Governance form"): "counting, for each holder and proposal, only the
  first VOTE receipt in log order. Where two PROPOSE receipts carry the same proposalId, the
  first in log order governs." A VOTE for a proposal with no earlier PROPOSE counts for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from saihm.events import Operation, Receipt

__all__ = ["Derived"]


@dataclass
class Derived:
    """Erasures and tallies accumulated leaf by leaf, in log order."""

    erasures: dict[bytes, int] = field(default_factory=dict)
    proposals: dict[bytes, int] = field(default_factory=dict)
    votes: dict[tuple[bytes, bytes], int] = field(default_factory=dict)
    tallies: dict[bytes, list[int]] = field(default_factory=dict)

    def apply(self, index: int, receipt: Receipt) -> None:
        """Account for receipt ``index`` (call in log order)."""
        op = receipt.operation
        subject = receipt.subject_id
        if op == Operation.FORGET:
            self.erasures.setdefault(subject, index)
        elif op == Operation.PROPOSE:
            self.proposals.setdefault(subject, index)
        elif op == Operation.VOTE and subject in self.proposals:
            key = (subject, receipt.holder_id)
            if key in self.votes:
                return
            self.votes[key] = index
            tally = self.tallies.setdefault(subject, [0, 0, 0])
            detail = receipt.detail
            tally[0 if detail.approve else 1] += detail.weight  # type: ignore[union-attr]

    def erasures_before(self, size: int) -> dict[bytes, int]:
        """The erasure list as it stood at tree size ``size``."""
        return {cell: index for cell, index in self.erasures.items() if index < size}
