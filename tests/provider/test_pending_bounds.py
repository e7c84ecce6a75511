"""Pending proposals are bounded (issue 11, Build 6): a cap per consumer and an expiry.

docs/operations.md: "a consumer holds at most --pending-max proposals ... a proposal expires
--pending-ttl seconds after it is made: it is no longer listed or acceptable, and its wrapped
DEK is destroyed".
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from saihm.compose import initialise
from saihm.config import Config
from saihm.errors import Conflict, NotFound
from saihm.operator import Operator
from saihm.provider.models import MemoryStore
from saihm.provider.vault import LocalVault
from saihm.store import Store
from tests.provider.conftest import Clock

CAP, TTL = 3, 1_000


@pytest.fixture
def bounded(tmp_path: Path):
    config = Config.for_data(
        tmp_path / "data",
        tmp_path / "kek",
        tmp_path / "authority",
        pending_max=CAP,
        pending_ttl=TTL,
    )
    authority = initialise(config)
    clock = Clock()
    store = Store(config, clock=clock)
    vault, _ = LocalVault.init(Operator(store, config), authority)
    try:
        yield vault, store, clock
    finally:
        store.close()


def _writer(vault: LocalVault, name: str):
    _, token = vault.grant(name, ["notes"], "write")
    return vault.for_consumer(token)


def _propose(provider, consumer: str, fact: str = "x"):
    return provider.store(MemoryStore(consumer=consumer, namespace="notes", content={"f": fact}))


def _held(store: Store) -> list[bytes]:
    return [pid for pid, _cell, _meta in store.held.items()]


def test_a_consumer_over_its_cap_is_refused_and_nothing_is_stored(bounded):
    vault, store, _ = bounded
    agent = _writer(vault, "agent")
    refs = [_propose(agent, "agent", str(i)) for i in range(CAP)]
    before = _held(store)
    leaves = store.size()
    with pytest.raises(Conflict) as refused:
        _propose(agent, "agent", "one too many")
    assert refused.value.code == "pending_full"
    assert _held(store) == before and store.size() == leaves
    # the cap is per consumer: another consumer still proposes
    other = _writer(vault, "other")
    _propose(other, "other")
    # and rejecting one frees a slot
    assert vault.reject(refs[0].id) is True
    _propose(agent, "agent", "fits again")
    assert len(_held(store)) == CAP + 1


def test_an_expired_proposal_is_not_listed_not_acceptable_and_its_dek_is_destroyed(bounded):
    vault, store, clock = bounded
    agent = _writer(vault, "agent")
    ref = _propose(agent, "agent")
    ((_, cell, _),) = store.held.items()
    clock.now += TTL - 1
    assert [p.id for p in vault.pending()] == [ref.id]  # still live one second before
    clock.now += 1
    assert vault.pending() == []
    with store.read_txn() as txn:
        assert not store.keyring.has_dek(txn, cell.cell_id)
    assert store.held.items() == []
    with pytest.raises(NotFound):
        vault.accept(ref.id)


def test_accepting_an_expired_proposal_is_refused_and_destroys_it(bounded):
    vault, store, clock = bounded
    agent = _writer(vault, "agent")
    ref = _propose(agent, "agent")
    ((_, cell, _),) = store.held.items()
    leaves = store.size()
    clock.now += TTL
    with pytest.raises(NotFound) as refused:
        vault.accept(ref.id)
    assert refused.value.code == "proposal_not_found"
    assert store.size() == leaves  # no REMEMBER receipt
    with store.read_txn() as txn:
        assert not store.keyring.has_dek(txn, cell.cell_id)


def test_expired_proposals_do_not_count_against_the_cap_and_are_swept_at_propose(bounded):
    vault, store, clock = bounded
    agent = _writer(vault, "agent")
    for i in range(CAP):
        _propose(agent, "agent", str(i))
    cells = [cell.cell_id for _pid, cell, _meta in store.held.items()]
    clock.now += TTL
    fresh = _propose(agent, "agent", "after expiry")
    assert [bytes.fromhex(fresh.id)] == _held(store)
    with store.read_txn() as txn:
        assert not any(store.keyring.has_dek(txn, c) for c in cells)


def test_sweep_drops_only_expired_proposals(bounded):
    from saihm.provider import pending

    vault, store, clock = bounded
    agent = _writer(vault, "agent")
    _propose(agent, "agent", "old")
    clock.now += TTL // 2
    young = _propose(agent, "agent", "young")
    clock.now += TTL // 2
    assert pending.sweep(vault) == 1
    assert _held(store) == [bytes.fromhex(young.id)]
    assert pending.sweep(vault) == 0


def test_the_expiry_is_written_into_the_proposal(bounded):
    vault, store, clock = bounded
    agent = _writer(vault, "agent")
    _propose(agent, "agent", "MARKER-5d1e")
    ((_, _, raw),) = store.held.items()
    meta = json.loads(raw)
    assert meta["expiresAt"] == int(clock.now) + TTL
    assert b"MARKER-5d1e" not in raw  # the record itself is not in the meta


# -- two processes -------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import json, sys
    from saihm.config import Config
    from saihm.errors import Conflict
    from saihm.operator import Operator
    from saihm.provider.models import MemoryStore
    from saihm.provider.vault import LocalVault
    from saihm.store import Store

    tmp, token, count, cap, ttl, later = sys.argv[1:7]
    config = Config.for_data(tmp + "/data", tmp + "/kek", tmp + "/authority",
                             pending_max=int(cap), pending_ttl=int(ttl))
    offset = float(later)
    import time
    store = Store(config, clock=lambda: time.time() + offset)
    try:
        vault = LocalVault.open(Operator(store, config))
        if token == "-":
            from saihm.provider import pending
            print(json.dumps({"swept": pending.sweep(vault)}))
        else:
            provider = vault.for_consumer(token)
            stored = refused = 0
            for i in range(int(count)):
                try:
                    provider.store(MemoryStore(consumer="agent", namespace="notes",
                                               content={"f": str(i)}))
                    stored += 1
                except Conflict as err:
                    assert err.code == "pending_full"
                    refused += 1
            print(json.dumps({"stored": stored, "refused": refused}))
    finally:
        store.close()
    """
)


def _child(tmp: Path, token: str, count: int, cap: int, ttl: int, later: float = 0.0):
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp), token, str(count), str(cap), str(ttl), str(later)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )


def _world(tmp: Path, cap: int, ttl: int) -> tuple[str, Config]:
    config = Config.for_data(
        tmp / "data", tmp / "kek", tmp / "authority", pending_max=cap, pending_ttl=ttl
    )
    authority = initialise(config)
    store = Store(config)
    try:
        vault, _ = LocalVault.init(Operator(store, config), authority)
        _, token = vault.grant("agent", ["notes"], "write")
    finally:
        store.close()
    assert token is not None
    return token, config


def test_two_processes_racing_never_pass_the_cap(tmp_path: Path):
    cap, each = 7, 6
    token, config = _world(tmp_path, cap, 10_000)
    children = [_child(tmp_path, token, each, cap, 10_000) for _ in range(2)]
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()[-2000:]
        results.append(json.loads(out))
    assert sum(r["stored"] for r in results) == cap
    assert sum(r["refused"] for r in results) == 2 * each - cap
    store = Store(config)
    try:
        assert len(store.held.items()) == cap
    finally:
        store.close()


def test_a_sweep_in_another_process_destroys_expired_proposals(tmp_path: Path):
    token, config = _world(tmp_path, 10, 60)
    child = _child(tmp_path, token, 2, 10, 60)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err.decode()[-2000:]
    assert json.loads(out) == {"stored": 2, "refused": 0}
    store = Store(config)
    try:
        cells = [cell.cell_id for _pid, cell, _meta in store.held.items()]
        assert len(cells) == 2
    finally:
        store.close()
    # a second process whose clock is past the expiry sweeps them
    sweeper = _child(tmp_path, "-", 0, 10, 60, later=61)
    out, err = sweeper.communicate(timeout=120)
    assert sweeper.returncode == 0, err.decode()[-2000:]
    assert json.loads(out) == {"swept": 2}
    store = Store(config)
    try:
        assert store.held.items() == []
        with store.read_txn() as txn:
            assert not any(store.keyring.has_dek(txn, c) for c in cells)
    finally:
        store.close()


# -- over HTTP, and the consumer grant's token length --------------------------------------


async def test_store_over_the_cap_answers_409_pending_full_over_http(aiohttp_client, bounded):
    from saihm.http.app import create_app

    vault, store, _ = bounded
    _, token = vault.grant("agent", ["notes"], "write")
    client = await aiohttp_client(create_app(vault.operator))
    headers = {"Authorization": f"Bearer {token}"}
    body = {"consumer": "agent", "namespace": "notes", "content": {"f": 1}}
    for _ in range(CAP):
        async with client.post("/memory/v1/store", json=body, headers=headers) as resp:
            assert resp.status == 200
    held = _held(store)
    async with client.post("/memory/v1/store", json=body, headers=headers) as resp:
        assert resp.status == 409
        assert await resp.json() == {"error": "pending_full"}
    assert _held(store) == held


def test_a_consumer_grant_whose_token_would_not_fit_changes_nothing(bounded):
    from saihm.errors import MalformedInput

    vault, store, _ = bounded
    _, first = vault.grant("agent", ["notes"], "read")
    leaves = store.size()
    names = [f"ns-{i:02d}-" + "x" * 200 for i in range(50)]
    with pytest.raises(MalformedInput) as refused:
        vault.grant("agent", names, "read")
    assert refused.value.code == "token_too_long"
    assert store.size() == leaves  # neither UNGRANT of the earlier grant nor GRANT
    assert vault.for_consumer(first).status().consumer == "agent"  # the earlier grant stands
