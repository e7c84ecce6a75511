"""Held proposals are written through the store's one write path (docs/internals.md "The
store"; saihm-protocol "Order of effect and receipt": a refused write changes nothing).

A held proposal's write (hold, reject) meets the same free-disk floor and fault hooks as every
other write: below the floor it is refused with ``Unavailable`` and nothing is stored, no DEK
wrapped, none destroyed.
"""

from __future__ import annotations

import shutil

import pytest

from saihm.errors import Unavailable
from saihm.events import Cell, SealedPayload
from saihm.events.envelope import seal
from saihm.store import Store
from tests.support.world import Holder, World

MIB = 1 << 20


def _proposal(store: Store, holder: Holder, content: str) -> tuple[Cell, bytes]:
    payload = SealedPayload(
        content=content, session_id=holder.session_id, namespace="memory", kind="memory"
    )
    return seal(
        payload,
        key=store.holder_key(holder.holder_id),
        kek_version=store.kek_version,
        tier="STANDARD",
        timestamp=int(store.clock()),
    )


def _has_dek(store: Store, cell: Cell) -> bool:
    with store.read_txn() as txn:
        return store.keyring.has_dek(txn, cell.cell_id)


@pytest.fixture
def floor_world(world_with) -> World:
    return world_with(min_free_disk=10 * MIB)


def _disk_nearly_full(monkeypatch) -> None:
    """The data volume reports one byte less free than the floor (until monkeypatch undoes)."""
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=10 * MIB - 1))


def test_holding_a_proposal_below_the_free_disk_floor_is_refused_and_changes_nothing(
    floor_world, monkeypatch
) -> None:
    store = floor_world.store
    alice = floor_world.holder()
    cell, dek = _proposal(store, alice, "proposed while the disk is full")
    with monkeypatch.context() as patch:
        _disk_nearly_full(patch)
        with pytest.raises(Unavailable):
            store.held.put(b"p" * 32, cell, dek, b"meta")
    assert store.held.items() == []
    assert not _has_dek(store, cell)
    # Space freed: the same proposal is held.
    store.held.put(b"p" * 32, cell, dek, b"meta")
    assert [(pid, c.cell_id) for pid, c, _ in store.held.items()] == [(b"p" * 32, cell.cell_id)]
    assert _has_dek(store, cell)


def test_rejecting_a_proposal_below_the_free_disk_floor_is_refused_and_changes_nothing(
    floor_world, monkeypatch
) -> None:
    store = floor_world.store
    alice = floor_world.holder()
    cell, dek = _proposal(store, alice, "held, then the disk filled")
    store.held.put(b"p" * 32, cell, dek, b"meta")
    with monkeypatch.context() as patch:
        _disk_nearly_full(patch)
        with pytest.raises(Unavailable):
            store.held.reject(b"p" * 32)
    assert len(store.held.items()) == 1 and _has_dek(store, cell)
    assert store.held.reject(b"p" * 32) is True
    assert store.held.items() == [] and not _has_dek(store, cell)
    assert store.held.reject(b"p" * 32) is False  # not held any more: nothing to write


def test_a_held_proposal_write_passes_the_fault_hook_and_a_fault_changes_nothing(world) -> None:
    store = world.store
    alice = world.holder()
    cell, dek = _proposal(store, alice, "proposed into a failing commit")
    steps: list[str] = []

    def hook(step: str) -> None:
        steps.append(step)
        if step == "before_commit":
            raise OSError("injected")

    store.env.fault_hook = hook
    with pytest.raises(Unavailable):
        store.held.put(b"p" * 32, cell, dek, b"meta")
    assert steps == ["before_commit"]
    assert store.held.items() == [] and not _has_dek(store, cell)
