"""A real operator over a temporary data directory, with an adjustable clock."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from saihm.authority import Authority
from saihm.compose import initialise
from saihm.config import Config
from saihm.events import CapabilityScope
from saihm.http.binding import call as binding_call
from saihm.operator import Operator
from saihm.store import Store


@dataclass
class Clock:
    """A settable clock so expiry rules can be tested without waiting."""

    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Holder:
    holder_id: bytes
    session_id: bytes
    token: str

    @property
    def hex(self) -> str:
        return self.holder_id.hex()


@dataclass
class World:
    config: Config
    authority: Authority
    operator: Operator
    clock: Clock
    holders: list[Holder] = field(default_factory=list)

    @property
    def store(self) -> Store:
        return self.operator.store

    def holder(self) -> Holder:
        holder_id = self.operator.create_holder()
        h = Holder(holder_id, b"", "")
        h.session_id, h.token = self.session(holder_id)
        self.holders.append(h)
        return h

    def session(self, holder_id: bytes) -> tuple[bytes, str]:
        session_id = secrets.token_bytes(32)
        cap = self.authority.issue(
            holder_id, session_id, CapabilityScope(), 3600, now=int(self.clock())
        )
        return session_id, cap.to_token()

    def grant_token(self, holder_id: bytes, namespaces: list[str] | None = None) -> str:
        grant_id, _ = self.operator.grant(holder_id, namespaces, int(self.clock()) + 3600)
        scope = CapabilityScope(
            sessions="all", namespaces=None if namespaces is None else tuple(namespaces),
            grant_id=grant_id,
        )  # fmt: skip
        cap = self.authority.issue(
            holder_id, secrets.token_bytes(32), scope, 3600, now=int(self.clock())
        )
        return cap.to_token()

    def call(self, holder: Holder | str, method: str, **params: object) -> object:
        token = holder if isinstance(holder, str) else holder.token
        return binding_call(self.operator, token, method, params)

    def reopen(self) -> None:
        self.operator.store.close()
        store = Store(self.config, clock=self.clock, checkpointer=False)
        self.operator = Operator(store, self.config)


def make_world(root: Path, **options: object) -> World:
    config = Config.for_data(root / "data", **options)
    authority = initialise(config)
    clock = Clock()
    store = Store(config, clock=clock, checkpointer=False)
    return World(config, authority, Operator(store, config), clock)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = make_world(tmp_path)
    yield w
    w.operator.store.close()


@pytest.fixture
def world_with(tmp_path: Path) -> Iterator[object]:
    """A factory for worlds with config options (``world_with(governance=False)``)."""
    made: list[World] = []

    def factory(**options: object) -> World:
        w = make_world(tmp_path / f"w{len(made)}", **options)
        made.append(w)
        return w

    yield factory
    for w in made:
        w.operator.store.close()
