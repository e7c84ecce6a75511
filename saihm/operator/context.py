"""What every part of the operator is given: the store, the policy, the clock, holder keys.

:class:`ToolContext` is a value, not a base class: :class:`saihm.operator.Operator` builds one
over its store and hands the same context to each of its parts (:mod:`.memory`,
:mod:`.sharing`, :mod:`.governance`, :mod:`.admin`). A part reads through ``context.store``'s
public read path (``read``, ``read_page``, ``read_txn`` with ``projections``) and writes only
through :meth:`ToolContext.commit` (docs/internals.md "One write path").
"""

from __future__ import annotations

from dataclasses import dataclass

from saihm.config import Config
from saihm.events import Operation
from saihm.events.identity import HolderKey
from saihm.events.signing import sign_receipt
from saihm.store import Access, Change, Store

__all__ = ["ToolContext"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """The store and configuration of one operator, and the steps every operation repeats."""

    store: Store
    config: Config

    @classmethod
    def over(cls, store: Store, config: Config | None = None) -> ToolContext:
        """The context of ``store`` under ``config`` (the store's own when None)."""
        return cls(store, config or store.config)

    def now(self) -> int:
        """The store's clock in whole seconds: every receipt's and cell's timestamp."""
        return int(self.store.clock())

    def key(self, access: Access) -> HolderKey:
        """The signing key of the holder ``access`` acts for."""
        return self.store.holder_key(access.holder_id)

    def holder_key(self, holder_id: bytes) -> HolderKey:
        """The signing key of ``holder_id`` (the person's actions, which carry no access)."""
        return self.store.holder_key(holder_id)

    def commit(self, change: Change) -> Change:
        """Hand ``change`` to the store's one write path and return it committed (its
        ``outcome`` set when its guard answered without writing)."""
        return self.store.commit(change)

    def log_receipt(self, access: Access, operation: Operation) -> None:
        """Write a receipt whose subject is the caller's holderId (RECALL, STATUS;
        saihm-protocol "Receipts"), unless the caller is the person (:attr:`Access.person`):
        the person's own reads log no public receipt, an agent's always do (read receipts are
        the operator's policy, "MAY"; docs/security.md "What the public log reveals"). The flag
        counts only on an access this store issued (sealed): one set by hand is logged."""
        if access.person and self.store.authenticator.issued(access):
            return
        receipt = sign_receipt(
            self.key(access),
            subject_id=access.holder_id,
            operation=operation,
            timestamp=self.now(),
        )
        self.commit(Change(receipts=[receipt]))
