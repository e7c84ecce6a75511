"""Holders: the KEY receipt of each holder (saihm-protocol "Identity")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from saihm.events.operations import Operation
from saihm.events.records import Body, HolderRecord
from saihm.projections.keys import LeafView
from saihm.projections.tables import Handler, Projection, Txn

HOLDERS = b"p_holders"  # holderId -> HolderRecord


class Holders(Projection):
    """``p_holders``, MAC-bound: a holder with no record is unknown and authenticates nothing."""

    DB_NAMES = (HOLDERS,)
    SEALED = frozenset({HOLDERS})

    __slots__ = ()

    def apply_key(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """The first KEY receipt of a holder publishes its public key (the detail)."""
        if self.t.raw(txn, HOLDERS, leaf.holder_id) is None:
            assert isinstance(leaf.detail, bytes), "a KEY receipt's detail is its public key"
            record = HolderRecord(leaf.detail, index, leaf.timestamp)
            self.t.put(txn, HOLDERS, leaf.holder_id, record.encode())

    HANDLERS: ClassVar[Mapping[Operation, Handler]] = {Operation.KEY: apply_key}

    def get(self, txn: Txn, holder_id: bytes) -> HolderRecord | None:
        """The holder's record, or None (unknown, or its MAC fails)."""
        raw = self.t.get(txn, HOLDERS, holder_id)
        return None if raw is None else HolderRecord.decode(raw, authentic=True)

    def known(self, txn: Txn, holder_id: bytes) -> bool:
        """Whether the holder has an authentic record (a KEY receipt)."""
        return self.t.get(txn, HOLDERS, holder_id) is not None
