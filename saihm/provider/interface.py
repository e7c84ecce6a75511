"""The provider contract of RFC 0007 ("Provider interface (draft)") as a Python Protocol.

A provider instance answers for one caller: the passport's memory service binds it to the
consumer's capability (``LocalVault.for_consumer(token)``) before calling it, so every method
is "called only after passport grant check" and the grant is re-checked on every call.
``store`` and ``graph`` are optional in the RFC; a provider without them raises ``Disabled``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from saihm.provider.models import (
    GraphExcerpt,
    GraphQuery,
    MemoryExcerpt,
    MemoryProviderStatus,
    MemoryQuery,
    MemoryRecordRef,
    MemoryStore,
)


@runtime_checkable
class MemoryProvider(Protocol):
    """``interface MemoryProvider`` of the RFC, synchronous."""

    @property
    def id(self) -> str:
        """e.g. ``"local-vault"``."""
        ...

    @property
    def version(self) -> str:
        """The provider's version string."""
        ...

    def status(self) -> MemoryProviderStatus:
        """Health and capabilities."""
        ...

    def query(self, request: MemoryQuery) -> MemoryExcerpt:
        """Read: a filtered excerpt of what the grant allows."""
        ...

    def store(self, request: MemoryStore) -> MemoryRecordRef:
        """Write: never a silent agent write (a consumer's store is held as pending)."""
        ...

    def graph(self, request: GraphQuery) -> GraphExcerpt:
        """Structured graph traversal over records the grant allows."""
        ...
