"""One real operator for tests, in two shapes, and the holders that act on it.

- :class:`World` (fixtures ``world`` and ``world_with``): a store, operator and authority over a
  temporary data directory with a settable :class:`Clock` and no background checkpointer, so
  rules about time and state can be driven step by step (tests/store, tests/audit, ...).
- The fixtures ``config``, ``authority`` and ``operator``: the operator as ``saihm serve``
  composes it (``open_operator``, the real clock), for tests that serve it over HTTP with
  pytest-aiohttp (tests/http, tests/client).

A conftest makes them available to its directory by importing them
(``from tests.support.world import operator as operator``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from saihm.authority import Authority
from saihm.compose import initialise
from saihm.config import Config
from saihm.events import CapabilityScope
from saihm.operator import Operator
from saihm.protocol import call as binding_call
from saihm.retrieval import Embedder
from saihm.store import Access, Store


@dataclass
class Clock:
    """A settable clock so expiry rules can be tested without waiting."""

    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class Holder:
    """A holder and one session token issued for it."""

    holder_id: bytes
    session_id: bytes
    token: str

    @property
    def hex(self) -> str:
        return self.holder_id.hex()

    @property
    def authorization(self) -> str:
        """The ``Authorization`` header value."""
        return f"Bearer {self.token}"

    @property
    def auth(self) -> dict[str, str]:
        """The ``Authorization`` header, ready for an HTTP client."""
        return {"Authorization": self.authorization}


def hand_made_access(holder_id: bytes, session_id: bytes) -> Access:
    """An :class:`Access` built by hand with the widest scope, not issued by
    ``Store.authenticate``: what a caller trying to manufacture read rights would pass."""
    return Access(
        holder_id=holder_id,
        session_id=session_id,
        all_sessions=True,
        namespaces=None,
        grant_id=None,
        consumer=None,
        mode=None,
        expires_at=2**40,
        token_id=bytes(32),
    )


def issue_holder(
    operator: Operator, authority: Authority, *, ttl: int = 3600, **issue: Any
) -> Holder:
    """A new holder with one session token of ``ttl`` seconds (``issue``: e.g. ``now=``)."""
    holder_id = operator.admin.create_holder()
    session_id = secrets.token_bytes(32)
    capability = authority.issue(holder_id, session_id, CapabilityScope(), ttl=ttl, **issue)
    return Holder(holder_id, session_id, capability.to_token())


@dataclass
class World:
    """A real operator over a temporary data directory, with an adjustable clock."""

    config: Config
    authority: Authority
    operator: Operator
    clock: Clock
    holders: list[Holder] = field(default_factory=list)
    #: The semantic stage's embedder, kept across :meth:`reopen`.
    embedder: Embedder | None = None

    @property
    def store(self) -> Store:
        return self.operator.store

    def holder(self) -> Holder:
        holder_id = self.operator.admin.create_holder()
        session_id, token = self.session(holder_id)
        h = Holder(holder_id, session_id, token)
        self.holders.append(h)
        return h

    def session(self, holder_id: bytes) -> tuple[bytes, str]:
        session_id = secrets.token_bytes(32)
        cap = self.authority.issue(
            holder_id, session_id, CapabilityScope(), 3600, now=int(self.clock())
        )
        return session_id, cap.to_token()

    def grant_token(self, holder_id: bytes, namespaces: list[str] | None = None) -> str:
        grant_id, _ = self.operator.admin.grant(holder_id, namespaces, int(self.clock()) + 3600)
        scope = CapabilityScope(
            sessions="all",
            namespaces=None if namespaces is None else tuple(namespaces),
            grant_id=grant_id,
        )
        cap = self.authority.issue(
            holder_id, secrets.token_bytes(32), scope, 3600, now=int(self.clock())
        )
        return cap.to_token()

    def call(self, holder: Holder | str, method: str, **params: object) -> object:
        token = holder if isinstance(holder, str) else holder.token
        return binding_call(self.operator, token, method, params)

    def share_accepted(self, owner: Holder, grantee: Holder, cell_ids: list[Any]) -> Any:
        """A permanent read contract of ``owner``'s cells (hex ids) for ``grantee``, accepted
        by it; returns the contractId."""
        contract = self.call(
            owner,
            "saihm_share",
            granteeIdHashesHex=[grantee.hex],
            shardIds=cell_ids,
            type="permanent",
            scope="read",
        )
        contract_id = contract["contractId"]  # type: ignore[index]
        self.call(grantee, "saihm_accept_contract", contractId=contract_id)
        return contract_id

    def reopen(self) -> None:
        self.operator.store.close()
        store = Store(self.config, clock=self.clock, embedder=self.embedder)
        self.operator = Operator(store, self.config)


def make_world(root: Path, embedder: Embedder | None = None, **options: Any) -> World:
    """A :class:`World` over ``root / "data"`` with ``Config`` ``options`` (and ``embedder``,
    the semantic stage's)."""
    config = Config.for_data(root / "data", **options)
    authority = initialise(config)
    clock = Clock()
    store = Store(config, clock=clock, embedder=embedder)
    return World(config, authority, Operator(store, config), clock, embedder=embedder)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = make_world(tmp_path)
    yield w
    w.operator.store.close()


@pytest.fixture
def world_with(tmp_path: Path) -> Iterator[Callable[..., World]]:
    """A factory for worlds with config options (``world_with(governance=False)``)."""
    made: list[World] = []

    def factory(**options: Any) -> World:
        w = make_world(tmp_path / f"w{len(made)}", **options)
        made.append(w)
        return w

    yield factory
    for w in made:
        w.operator.store.close()


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config.for_data(tmp_path / "data")


@pytest.fixture
def authority(config: Config) -> Authority:
    return initialise(config)


@pytest.fixture
def operator(config: Config, authority: Authority) -> Iterator[Operator]:
    from saihm.compose import open_operator

    operator = open_operator(config)
    yield operator
    operator.store.close()
