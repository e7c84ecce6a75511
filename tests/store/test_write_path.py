"""The write path's shape (issue 24, item 1): what one remember reads and when it is answered.

Behaviour only, never timing: how often the KEK state file is read for one remember, and the
order of a batch's commit, its post-commit work and its acknowledgement.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from saihm.keyring import Keyring, kekdir
from tests.support.world import World


def _state_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the KEK state file's JSON parses (each fresh read or re-read parses it once)."""
    reads: list[int] = []
    loads = json.loads

    def counting(data: Any, *args: Any, **kwargs: Any) -> Any:
        value = loads(data, *args, **kwargs)
        if isinstance(value, dict) and {"current", "highest", "retired"} <= value.keys():
            reads.append(value["current"])
        return value

    monkeypatch.setattr(kekdir.json, "loads", counting)
    return reads


def test_one_remember_reads_the_kek_state_once(world: World, monkeypatch: pytest.MonkeyPatch):
    """The state file is read afresh once, inside the write transaction, for the wrap; the
    cell's kekVersion and the cache's generation come from the checked copy."""
    holder = world.holder()
    world.call(holder, "saihm_remember", content="warm up")
    reads = _state_reads(monkeypatch)
    result = world.call(holder, "saihm_remember", content="one more")
    assert reads == [1]
    assert result["kekVersion"] == 1  # type: ignore[index]


def test_the_checked_copy_follows_another_process_rotation(world: World):
    """A rotation through another KekDirectory (another process's) replaces the state file;
    the next remember here labels its cell with the new generation and wraps under it."""
    holder = world.holder()
    world.call(holder, "saihm_remember", content="before")
    store = world.store
    assert store.kek_dir.current_version == 1
    other = kekdir.KekDirectory(store.kek_dir.path)
    Keyring(store.storage, other).rotate()
    assert store.kek_dir.current_version == 2
    result = world.call(holder, "saihm_remember", content="after")
    assert result["kekVersion"] == 2  # type: ignore[index]
    with store.read_txn() as txn:
        assert store.keyring.versions_in_use(txn) == {2: 3}
