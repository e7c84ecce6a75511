"""What every group of SAIHM tools shares: the store, the policy, the clock and signing keys.

:class:`saihm.operator.Operator` combines the tool groups (:mod:`saihm.sharing`,
:mod:`saihm.governance` and its own core tools) over this base.
"""

from __future__ import annotations

from saihm.config import Config
from saihm.events import Operation
from saihm.events.identity import HolderKey
from saihm.events.signing import sign_receipt
from saihm.store import Access, Change, Store


class ToolBase:
    """The store and configuration of one operator, and the steps every tool repeats."""

    def __init__(self, store: Store, config: Config | None = None) -> None:
        self.store = store
        self.config = config or store.config

    def _now(self) -> int:
        return int(self.store.clock())

    def _key(self, access: Access) -> HolderKey:
        return self.store.holder_key(access.holder_id)

    def _commit(self, change: Change) -> Change:
        return self.store.commit(change)

    def log_receipt(self, access: Access, operation: Operation) -> None:
        """Write a receipt whose subject is the caller's holderId (RECALL, STATUS)."""
        receipt = sign_receipt(
            self._key(access),
            subject_id=access.holder_id,
            operation=operation,
            timestamp=self._now(),
        )
        self._commit(Change(receipts=[receipt]))
