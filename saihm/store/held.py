"""Held proposals: prepared cells kept outside the log, in the ``provider-pending`` namespace.

RFC 0007 "never silent agent write". A consumer's write proposal is kept as a prepared cell:
sealed, signed, its DEK wrapped in the keyring beside every other DEK (so KEK rotation re-wraps
it) and its cell bytes here. Nothing here is plaintext. Every write goes through the store's
one write path (:class:`~saihm.store.commit.GroupCommit`: the free-disk floor, map growth, the
fault hook) as a :class:`Change` without receipts. Accepting commits the cell with a REMEMBER
receipt (:meth:`HeldProposals.take_guard` removes it in that commit's transaction); rejecting
deletes the entry and destroys the wrapped DEK. Pending cells are in no projection, so the
checked read path never offers them; their content is opened only through it
(:meth:`CheckedReader.open_prepared`, with the person's Access).

An entry is CBOR ``{1: cell CBOR, 2: caller's meta}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from saihm.errors import Conflict, NotFound, VerificationFailed
from saihm.events import Cell, SealedPayload
from saihm.projections.keys import dumps, loads
from saihm.storage import Namespace, ReadTxn, WriteTxn
from saihm.store.auth import Access
from saihm.store.commit import Change, GroupCommit
from saihm.store.environment import PENDING, Environment
from saihm.store.read.reader import CheckedReader

__all__ = ["Admit", "HeldProposals"]

#: A decision on the held proposals, made inside the write transaction that adds one.
Admit = Callable[[list[tuple[bytes, bytes]]], Iterable[bytes]]


def _entry(raw: bytes) -> tuple[bytes, bytes]:
    """(cell CBOR, meta) of a stored entry; ``VerificationFailed`` for a damaged one."""
    entry = loads(raw)
    if not isinstance(entry, dict):
        raise VerificationFailed("damaged pending proposal")
    cell, meta = entry.get(1), entry.get(2)
    if not isinstance(cell, bytes) or not isinstance(meta, bytes):
        raise VerificationFailed("damaged pending proposal")
    return cell, meta


def _not_found() -> NotFound:
    return NotFound("no such pending proposal", code="proposal_not_found")


class HeldProposals:
    """The held proposals of one store (``Store.held``)."""

    def __init__(self, env: Environment, commits: GroupCommit, reader: CheckedReader) -> None:
        self.env = env
        self.commits = commits
        self.reader = reader
        self.db: Namespace = env.db[PENDING]

    def put(
        self,
        proposal_id: bytes,
        cell: Cell,
        dek: bytes,
        meta: bytes,
        admit: Admit | None = None,
    ) -> None:
        """Hold a prepared cell and its DEK (wrapped under the current KEK) for confirmation.

        ``admit``, when given, is called inside the write transaction (so across processes no
        other proposal lands in between) with every held ``(proposalId, meta)``; it returns
        the proposals to drop first (their DEKs destroyed) or raises a ``SaihmError`` to refuse
        this one, which then changes nothing. A proposal id already held raises
        :class:`Conflict`; a store that cannot write raises ``Unavailable``.
        """
        entry = dumps({1: cell.to_cbor(), 2: meta})
        change = Change(receipts=[], deks=[(cell.cell_id, dek)], held=[(proposal_id, entry)])

        def guard(txn: WriteTxn) -> object:
            # Everything is decided before anything is written: a refusal changes nothing.
            if txn.get(proposal_id, db=self.db) is not None:
                raise Conflict("proposal id already in use")
            dropped: list[tuple[bytes, bytes]] = []
            if admit is not None:
                held = [(bytes(k), _entry(v)[1]) for k, v in txn.scan(self.db)]
                for drop in admit(held):
                    raw = txn.get(drop, db=self.db)
                    if raw is not None:
                        dropped.append((drop, Cell.from_cbor(_entry(raw)[0]).cell_id))
            # Assigned, not appended: a batch retried after the map grew runs the guard again.
            change.released = [proposal_id for proposal_id, _ in dropped]
            change.destroy = [cell_id for _, cell_id in dropped]
            return None

        change.guard = guard
        self.commits.commit(change)

    def items(self) -> list[tuple[bytes, Cell, bytes]]:
        """Every held proposal: (proposalId, prepared cell, meta), by proposalId."""
        with self.env.storage.read() as txn:
            out = []
            for key, value in txn.scan(self.db):
                cell, meta = _entry(value)
                out.append((bytes(key), Cell.from_cbor(cell), meta))
            return out

    def open(self, access: Access, proposal_id: bytes) -> tuple[Cell, bytes, SealedPayload]:
        """One held proposal, its cellId and signature checked, decrypted for ``access``
        through the store's checked read path.

        Raises :class:`NotFound` ("proposal_not_found") if no such proposal is held or it is
        not ``access``'s own (holder and session), ``VerificationFailed`` if it does not check.
        """
        with self.env.storage.read() as txn:
            cell, meta = self._get(txn, proposal_id)
            payload = self.reader.open_prepared(txn, access, cell)
        if payload is None:
            raise _not_found()
        return cell, meta, payload

    def get(self, proposal_id: bytes) -> tuple[Cell, bytes]:
        """One held proposal's prepared cell and meta, not opened; :class:`NotFound` if none."""
        with self.env.storage.read() as txn:
            return self._get(txn, proposal_id)

    def _get(self, txn: ReadTxn, proposal_id: bytes) -> tuple[Cell, bytes]:
        raw = txn.get(proposal_id, db=self.db)
        if raw is None:
            raise _not_found()
        cell, meta = _entry(raw)
        return Cell.from_cbor(cell), meta

    def take_guard(self, proposal_id: bytes) -> Callable[[WriteTxn], object]:
        """A :class:`Change` guard that removes the proposal inside the commit's transaction.

        The cell then becomes live in the same transaction that logs its REMEMBER receipt, or
        neither happens; a proposal already taken or rejected refuses the change (NotFound).
        """
        db = self.db

        def guard(txn: WriteTxn) -> object:
            if not txn.delete(proposal_id, db=db):
                raise _not_found()
            return None

        return guard

    def reject(self, proposal_id: bytes) -> bool:
        """Drop a proposal and destroy its wrapped DEK; False if it was not held.

        Raises ``Unavailable`` when the store cannot write (nothing changed then).
        """
        change = Change(receipts=[], released=[proposal_id])

        def guard(txn: WriteTxn) -> object:
            raw = txn.get(proposal_id, db=self.db)
            if raw is None:
                return False  # answered without writing
            change.destroy = [Cell.from_cbor(_entry(raw)[0]).cell_id]
            return None

        change.guard = guard
        return self.commits.commit(change).outcome is None
