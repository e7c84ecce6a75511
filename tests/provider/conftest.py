"""A real store, operator, authority and local-vault over a temporary data directory."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from saihm.authority import Authority
from saihm.compose import initialise
from saihm.config import Config
from saihm.events import Operation
from saihm.operator import Operator
from saihm.provider.models import MemoryStore
from saihm.provider.vault import ConsumerProvider, LocalVault
from saihm.store import Store
from tests.support.world import Clock


@dataclass
class Vault:
    config: Config
    authority: Authority
    operator: Operator
    vault: LocalVault
    clock: Clock

    @property
    def store(self) -> Store:
        return self.operator.store

    def put(self, namespace: str, content: object, **meta: object) -> str:
        """Store a record as the person; returns its id."""
        return self.vault.store(MemoryStore(namespace=namespace, content=content, **meta)).id

    def consumer(
        self, name: str, namespaces: list[str], mode: str | None = "read"
    ) -> ConsumerProvider:
        _, token = self.vault.grant(name, namespaces, mode)  # type: ignore[arg-type]
        assert token is not None
        return self.vault.for_consumer(token)

    def token(self, name: str, namespaces: list[str], mode: str = "read") -> str:
        _, token = self.vault.grant(name, namespaces, mode)  # type: ignore[arg-type]
        assert token is not None
        return token

    def recalls(self) -> int:
        """RECALL receipts in the log, all of them."""
        count, cursor = 0, 0
        while True:
            rows, nxt = self.store.receipts("operation", Operation.RECALL.value.encode(), cursor)
            count += len(rows)
            if nxt is None:
                return count
            cursor = nxt


def make_vault(tmp: Path) -> tuple[Vault, Store]:
    config = Config.for_data(tmp / "data", tmp / "kek", tmp / "authority")
    authority = initialise(config)
    clock = Clock()
    store = Store(config, clock=clock)
    operator = Operator(store, config)
    vault, created = LocalVault.init(operator, authority)
    assert created
    return Vault(config, authority, operator, vault, clock), store


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Vault]:
    v, store = make_vault(tmp_path)
    try:
        yield v
    finally:
        store.close()
