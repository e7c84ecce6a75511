"""Fixtures for the client library: a real Operator served by pytest-aiohttp on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from saihm.authority import Authority
from saihm.operator import Operator
from tests.support.world import authority as authority
from tests.support.world import config as config
from tests.support.world import issue_holder
from tests.support.world import operator as operator


@pytest.fixture
async def endpoint(aiohttp_server, operator: Operator) -> str:
    """The URL of the real application over ``operator``."""
    from saihm.http.app import create_app

    server = await aiohttp_server(create_app(operator))
    return str(server.make_url("/"))


def issue(operator: Operator, authority: Authority, *, ttl: int = 3600) -> tuple[str, str]:
    """A new holder with one session; returns (holderId hex, "Bearer <token>")."""
    holder = issue_holder(operator, authority, ttl=ttl)
    return holder.hex, holder.authorization


@pytest.fixture
def new_holder(operator: Operator, authority: Authority) -> Callable[..., tuple[str, str]]:
    """``new_holder()`` -> (holderId hex, Authorization value) of a fresh holder."""
    return lambda **kw: issue(operator, authority, **kw)
