"""Boundaries a mutation audit found untested (issue 32, item 11): a cached token at its
exact expiry second, and holder-wide ranked recall with ``limit`` on the warm cached path."""

from __future__ import annotations

import hashlib

import pytest

import saihm.store.read.reader as reader_module
from saihm.errors import Unauthenticated
from saihm.events import Capability
from tests.support.world import World


def test_a_cached_token_works_one_second_before_its_expiry_and_not_at_it(world: World) -> None:
    holder = world.holder()
    expires_at = Capability.from_token(holder.token).expires_at
    store = world.store
    store.authenticate(holder.token)  # verified once, then cached
    digest = hashlib.sha256(holder.token.encode()).digest()
    assert digest in store.authenticator._token_cache

    world.clock.now = expires_at - 1
    assert store.authenticate(holder.token).holder_id == holder.holder_id
    assert digest in store.authenticator._token_cache  # the cached path, not a new verify
    world.clock.now = expires_at
    with pytest.raises(Unauthenticated, match="expired capability"):
        store.authenticate(holder.token)
    world.clock.now = expires_at + 1
    with pytest.raises(Unauthenticated, match="expired capability"):
        store.authenticate(holder.token)


def _ids(world: World, token: str, **params: object) -> list[str]:
    return [item["cellId"] for item in world.call(token, "saihm_recall", **params)]  # type: ignore[union-attr]


def test_holder_wide_ranked_recall_honours_limit_on_the_warm_cached_path(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder-wide token (sessions "all", every namespace) ranks over the holder's cached
    index (saihm/store/read/holderwide.py); ``limit`` must cut the ranked answer there exactly: the
    first ``limit`` of the unlimited ranking, for every ``limit`` up to one past the end."""
    holder = world.holder()
    for n in range(6):
        world.call(holder, "saihm_remember", content=f"river stone {'river ' * n}note {n}")
    world.call(holder, "saihm_remember", content="nothing to do with the query")
    wide = world.grant_token(holder.holder_id)

    served: list[bool] = []  # whether each recall was answered from the holder's index
    real = reader_module.read_holder_wide

    def spy(*args: object, **kwargs: object) -> object:
        page = real(*args, **kwargs)  # type: ignore[arg-type]
        served.append(page is not None)
        return page

    monkeypatch.setattr(reader_module, "read_holder_wide", spy)
    ranked = _ids(world, wide, query="river stone")  # warms the cache
    assert len(ranked) == 6
    assert served and served[-1] is True
    for limit in range(1, len(ranked) + 2):
        served.clear()
        assert _ids(world, wide, query="river stone", limit=limit) == ranked[:limit], limit
        assert served == [True], limit  # the warm holder-wide path answered
