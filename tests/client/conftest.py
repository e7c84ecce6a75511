"""Fixtures for the client library: a real Operator served by pytest-aiohttp on 127.0.0.1."""

from __future__ import annotations

import pytest

from saihm.config import Config


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
async def endpoint(aiohttp_server, operator) -> str:
    """The URL of the real application over ``operator``."""
    from saihm.http.app import create_app

    server = await aiohttp_server(create_app(operator))
    return str(server.make_url("/"))


def issue(operator, authority, *, ttl: int = 3600) -> tuple[str, str]:
    """A new holder with one session; returns (holderId hex, "Bearer <token>")."""
    import secrets

    from saihm.events import CapabilityScope

    holder_id = operator.create_holder()
    token = authority.issue(holder_id, secrets.token_bytes(32), CapabilityScope(), ttl=ttl)
    return holder_id.hex(), f"Bearer {token.to_token()}"


@pytest.fixture
def new_holder(operator, authority):
    """``new_holder()`` -> (holderId hex, Authorization value) of a fresh holder."""
    return lambda **kw: issue(operator, authority, **kw)
