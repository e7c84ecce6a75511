"""Fixtures for the HTTP binding: a real Operator over a temporary data directory."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import pytest

from saihm.config import Config


@dataclass(frozen=True)
class Holder:
    holder_id: bytes
    session_id: bytes
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def make_holder(operator, authority, **issue) -> Holder:
    from saihm.events import CapabilityScope

    holder_id = operator.create_holder()
    session_id = secrets.token_bytes(32)
    token = authority.issue(holder_id, session_id, CapabilityScope(), ttl=3600, **issue).to_token()
    return Holder(holder_id, session_id, token)


async def call(client, holder: Holder | None, method: str, params: dict | None = None):
    """POST one binding call; returns (status, decoded JSON body)."""
    headers = {} if holder is None else holder.auth
    body = {"method": method, "params": {} if params is None else params}
    async with client.post("/", json=body, headers=headers) as resp:
        return resp.status, await resp.json()


@pytest.fixture
def config(tmp_path):
    return Config.for_data(tmp_path / "data")


@pytest.fixture
def authority(config):
    from saihm.compose import initialise

    return initialise(config)


@pytest.fixture
def operator(config, authority):
    from saihm.compose import open_operator

    operator = open_operator(config)
    yield operator
    operator.store.close()


@pytest.fixture
def holder(operator, authority) -> Holder:
    return make_holder(operator, authority)


@pytest.fixture
async def client(aiohttp_client, operator):
    from saihm.http.app import create_app

    return await aiohttp_client(create_app(operator))


@pytest.fixture(name="call")
def call_fixture():
    """The ``call(client, holder, method, params)`` helper."""
    return call


@pytest.fixture(name="make_holder")
def make_holder_fixture():
    """The ``make_holder(operator, authority, **issue)`` helper."""
    return make_holder
