"""Fixtures for the HTTP binding: a real Operator over a temporary data directory."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from saihm.authority import Authority
from saihm.operator import Operator
from tests.support.world import Holder, issue_holder
from tests.support.world import authority as authority
from tests.support.world import config as config
from tests.support.world import operator as operator


async def call(client, holder: Holder | None, method: str, params: dict | None = None):
    """POST one binding call; returns (status, decoded JSON body)."""
    headers = {} if holder is None else holder.auth
    body = {"method": method, "params": {} if params is None else params}
    async with client.post("/", json=body, headers=headers) as resp:
        return resp.status, await resp.json()


@pytest.fixture
def holder(operator: Operator, authority: Authority) -> Holder:
    return issue_holder(operator, authority)


@pytest.fixture
async def client(aiohttp_client, operator):
    from saihm.http.app import create_app

    return await aiohttp_client(create_app(operator))


@pytest.fixture(name="call")
def call_fixture():
    """The ``call(client, holder, method, params)`` helper."""
    return call


@pytest.fixture
def make_holder() -> Callable[..., Holder]:
    """The ``make_holder(operator, authority, **issue)`` helper (``ttl=``, ``now=``)."""
    return issue_holder
