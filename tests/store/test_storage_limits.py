"""Bounded storage, clear refusals (issue 11, Build 6; docs/operations.md "Storage limits").

The LMDB map grows by doubling when a write needs it, up to ``map_size_max``; beyond it, and
whenever the data volume is below ``min_free_disk``, writes are refused with 503
``operator_storage_unavailable`` (saihm-protocol "Order of effect and receipt": nothing has
changed) and nothing acknowledged is lost. Another process sharing the environment adopts a map
that a first one grew.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from saihm.errors import SaihmError, Unavailable
from saihm.operator import Operator
from saihm.store import Store
from tests.support.postgres import lmdb_only

pytestmark = lmdb_only("the LMDB map and its growth")

CHILD = Path(__file__).with_name("_store_child.py")
SAIHM = str(Path(sys.executable).parent / "saihm")
MIB = 1 << 20
WAIT = 30.0


def _fill_until_refused(world, holder, limit: int = 5000) -> tuple[list[str], dict[int, int]]:
    """Remember until the store refuses; return what was acknowledged and how many writes
    were acknowledged at each map size."""
    done: list[str] = []
    at_size: dict[int, int] = {}
    for i in range(limit):
        content = f"note {i} " + "x" * 400
        try:
            world.call(holder, "saihm_remember", content=content)
        except SaihmError as err:
            assert err.code == "operator_storage_unavailable" and err.status == 503
            return done, at_size
        done.append(content)
        size = world.store.storage.map_size
        at_size[size] = at_size.get(size, 0) + 1
    pytest.fail(f"{limit} writes and never refused")


def _plaintexts(store: Store, token: str) -> list[str]:
    """What the checked read path returns (no RECALL receipt: the map is full)."""
    return sorted(c.payload.content for c in store.read(store.authenticate(token)))


def test_a_tiny_map_grows_to_its_ceiling_then_refuses_and_loses_nothing(world_with):
    world = world_with(map_size=MIB, map_size_max=3 * MIB, min_free_disk=0)
    alice = world.holder()
    start = world.store.size()
    done, at_size = _fill_until_refused(world, alice)
    # It grew 1 -> 2 -> 3 MiB (doubling, capped at the ceiling), accepting writes at each size.
    assert sorted(at_size) == [2 * MIB, 3 * MIB] or sorted(at_size) == [MIB, 2 * MIB, 3 * MIB]
    assert world.store.storage.map_size == 3 * MIB
    # Refused writes changed nothing; each acknowledged one is logged exactly once.
    size = world.store.size()
    assert size == start + len(done)
    # Tried again, writes of the same size are refused again before long. One may still fit:
    # pages an old snapshot held are free once its reader has gone (LMDB's freelist), so a
    # retry is either refused, changing nothing, or acknowledged and logged once.
    for _ in range(50):
        content = f"note {len(done)} " + "x" * 400
        try:
            world.call(alice, "saihm_remember", content=content)
        except Unavailable:
            break
        done.append(content)
    else:
        pytest.fail("50 retries at the ceiling and never refused again")
    assert world.store.size() == start + len(done)
    assert _plaintexts(world.store, alice.token) == sorted(done)
    # The offline check of the data directory (another process) passes on the full store.
    verify = subprocess.run(
        [SAIHM, "verify", "--data", str(world.config.data_dir), "--json", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # A restart with a higher ceiling accepts writes again; everything is still there.
    world.store.close()
    config = dataclasses.replace(world.config, map_size_max=8 * MIB)
    world.operator = Operator(Store(config, clock=world.clock), config)
    world.call(alice, "saihm_remember", content="after raising the ceiling")
    recalled = sorted(c["plaintext"] for c in world.call(alice, "saihm_recall"))
    assert recalled == sorted([*done, "after raising the ceiling"])


@pytest.fixture
def floor_world(world_with):
    return world_with(min_free_disk=10 * MIB)


async def test_http_write_below_the_free_disk_floor_is_503_and_changes_nothing(
    floor_world, monkeypatch, aiohttp_client
):
    from saihm.http.app import create_app

    world = floor_world
    alice = world.holder()
    world.call(alice, "saihm_remember", content="before the disk filled")
    size = world.store.size()
    real = shutil.disk_usage

    def nearly_full(path):
        usage = real(path)
        return usage._replace(free=10 * MIB - 1)

    monkeypatch.setattr(shutil, "disk_usage", nearly_full)
    client = await aiohttp_client(create_app(world.operator))
    headers = {"Authorization": f"Bearer {alice.token}"}
    for method, params in (
        ("saihm_remember", {"content": "refused"}),
        ("saihm_recall", {}),  # its RECALL receipt is a write too
    ):
        async with client.post(
            "/", json={"method": method, "params": params}, headers=headers
        ) as resp:
            assert resp.status == 503
            assert await resp.json() == {"error": "operator_storage_unavailable"}
    assert world.store.size() == size
    monkeypatch.setattr(shutil, "disk_usage", real)
    async with client.post(
        "/",
        json={"method": "saihm_remember", "params": {"content": "after space was freed"}},
        headers=headers,
    ) as resp:
        assert resp.status == 200
    assert world.store.size() == size + 1
    assert _plaintexts(world.store, alice.token) == [
        "after space was freed",
        "before the disk filled",
    ]


def test_another_process_grows_the_map_and_this_one_adopts_it(world_with) -> None:
    """Two processes on one environment: a child grows the map far past this process's; this
    process then reads the child's cells (LMDB answers MDB_MAP_RESIZED; the store adopts the
    size with set_mapsize(0)) and writes on."""
    options = {"map_size": MIB, "map_size_max": 64 * MIB, "min_free_disk": 0}
    world = world_with(**options)
    alice = world.holder()
    assert world.store.storage.map_size == MIB
    spec = {
        "data": str(world.config.data_dir),
        "now": world.clock(),
        "job": "remember",
        "options": options,
        "token": alice.token,
        "count": 600,
        "prefix": "child " + "y" * 300,
    }
    done = subprocess.run(
        [sys.executable, str(CHILD), json.dumps(spec)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout.strip().splitlines()[-1])
    assert child["refused"] == [] and child["map"] > 2 * MIB
    assert len(_plaintexts(world.store, alice.token)) == 600
    assert world.store.storage.map_size >= child["map"] > MIB
    world.call(alice, "saihm_remember", content="parent after growth")
    assert len(_plaintexts(world.store, alice.token)) == 601


def test_a_resize_waits_for_open_transactions_of_this_process(world) -> None:
    """set_mapsize must not run under an open read transaction (its pages would be unmapped):
    growth waits until the other thread's transaction ends, and refuses inside one's own."""
    env = world.store.storage
    memo = env.namespace(b"memo")
    before = env.map_size
    opened, finish = threading.Event(), threading.Event()

    def reader() -> None:
        with env.read() as txn:
            txn.get(b"x", db=memo)
            opened.set()
            assert finish.wait(WAIT)

    t = threading.Thread(target=reader)
    t.start()
    assert opened.wait(WAIT)
    grown = threading.Event()
    g = threading.Thread(target=lambda: grown.set() if env.grow() else None)
    g.start()
    assert not grown.wait(0.3)  # held off by the open read transaction
    finish.set()
    t.join(WAIT)
    g.join(WAIT)
    assert grown.is_set() and env.map_size == min(2 * before, env.ceiling)
    with env.read() as txn, pytest.raises(Unavailable):
        txn.get(b"x", db=memo)
        env.grow()
