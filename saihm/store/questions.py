"""The store's typed questions: what callers outside the store may ask of the projections.

Code outside ``saihm/store/`` and ``saihm/projections/`` never reads ``store.projections``
(tests/store/test_store_front.py); it asks a :class:`Questions` over one transaction instead,
so several answers that must agree come from the same snapshot:

- ``with store.questions() as q:`` opens one read transaction for several questions;
- ``store.ask(txn)`` asks inside a transaction the caller already holds (a guard's write
  transaction, a read that also asks the store's other parts);
- ``store.cell_record``, ``store.holder_known``, ``store.contract`` and ``store.grant`` answer
  one question in a read transaction of their own.

Every answer is metadata (records of the projections), never plaintext.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from saihm.projections.grants import revocation_subject

if TYPE_CHECKING:
    from saihm.projections import (
        CellRecord,
        ContractRecord,
        GrantRecord,
        HolderRecord,
        ProposalRecord,
        Tally,
        Vote,
    )
    from saihm.storage import ReadTxn
    from saihm.store.environment import Environment

__all__ = ["Questions"]


class Questions:
    """The projections' answers in one transaction ``txn`` (a read or a write transaction)."""

    __slots__ = ("_env", "txn")

    def __init__(self, env: Environment, txn: ReadTxn) -> None:
        self._env = env
        self.txn = txn

    # -- cells ----------------------------------------------------------------------------

    def cell_record(self, cell_id: bytes) -> CellRecord | None:
        """The cell's record (owner, tier, erased, session tag), or None if never stored."""
        return self._env.projections.cells.get(self.txn, cell_id)

    def cell_records(self, cell_ids: list[bytes]) -> list[CellRecord | None]:
        """:meth:`cell_record` of each of ``cell_ids``, in order."""
        cells = self._env.projections.cells
        return [cells.get(self.txn, cell_id) for cell_id in cell_ids]

    def cell_erased(self, cell_id: bytes) -> bool:
        """Whether the cell has been erased (FORGET; erasure is final)."""
        return self._env.projections.cells.is_erased(self.txn, cell_id)

    def live_cells_of_holder(self, holder_id: bytes) -> Iterator[bytes]:
        """The ids of the holder's live cells, by the index (a hint: check each record)."""
        for _, cell_id in self._env.projections.cells.live_of_holder(self.txn, holder_id):
            yield cell_id

    def session_wrote(self, holder_id: bytes, session_id: bytes) -> bool:
        """Whether the holder's session has a record cell or a live cell stored under it."""
        tag = self._env.session_tag(holder_id, session_id)
        cells = self._env.projections.cells
        if cells.record_head(self.txn, tag) is not None:
            return True
        return next(cells.live_of_session(self.txn, tag), None) is not None

    # -- holders, grants, revocations -----------------------------------------------------

    def holder_known(self, holder_id: bytes) -> bool:
        """Whether a KEY receipt created ``holder_id``."""
        return self._env.projections.holders.known(self.txn, holder_id)

    def holder(self, holder_id: bytes) -> HolderRecord | None:
        """The holder's KEY record (its log index), or None for an unknown holder."""
        return self._env.projections.holders.get(self.txn, holder_id)

    def grant(self, grant_id: bytes) -> GrantRecord | None:
        """The grant's record (holder, revoked), or None for an unknown grant."""
        return self._env.projections.grants.get(self.txn, grant_id)

    def revoked(self, holder_id: bytes, token_or_session_id: bytes) -> bool:
        """Whether an UNGRANT revoked this tokenId or sessionId of ``holder_id``
        (:func:`~saihm.projections.grants.revocation_subject`)."""
        subject = revocation_subject(holder_id, token_or_session_id)
        return self._env.projections.grants.revocation(self.txn, subject) is not None

    # -- contracts ------------------------------------------------------------------------

    def contract(self, contract_id: bytes) -> ContractRecord | None:
        """The contract's record, or None for an unknown contract."""
        return self._env.projections.contracts.get(self.txn, contract_id)

    def contracts_of_holder(self, holder_id: bytes) -> Iterator[tuple[bytes, ContractRecord]]:
        """(contractId, record) of each contract ``holder_id`` signed."""
        return self._env.projections.contracts.of_holder(self.txn, holder_id)

    def contracts_to_grantee(self, grantee: bytes) -> Iterator[tuple[bytes, ContractRecord]]:
        """(contractId, record) of each contract naming ``grantee`` (an index hint)."""
        return self._env.projections.contracts.of_grantee(self.txn, grantee)

    # -- receipts and governance ----------------------------------------------------------

    def receipt_times_of_holder(self, holder_id: bytes) -> Iterator[int]:
        """The timestamp of each receipt signed by ``holder_id``."""
        return self._env.projections.receipts.timestamps_of_holder(self.txn, holder_id)

    def proposals(self) -> Iterator[tuple[bytes, ProposalRecord]]:
        """(proposalId, record) of every governance proposal, in the projection's order."""
        return self._env.projections.governance.proposals(self.txn)

    def proposal(self, proposal_id: bytes) -> ProposalRecord | None:
        """The proposal's record, or None for an unknown proposal."""
        return self._env.projections.governance.proposal(self.txn, proposal_id)

    def vote(self, proposal_id: bytes, holder_id: bytes) -> Vote | None:
        """The holder's recorded vote on the proposal, or None."""
        return self._env.projections.governance.vote(self.txn, proposal_id, holder_id)

    def tally(self, proposal_id: bytes) -> Tally:
        """The proposal's tally so far."""
        return self._env.projections.governance.tally(self.txn, proposal_id)
