"""A leaf row inserted far beyond the log (a raw LMDB write, key ``2**62``): the tree size is
the last index plus one, so ``saihm verify --data`` once read 2**62 "leaves" in chunks and never
ended. It is now one finding naming the log (saihm/offline/fsck.py ``_dense_log``); the PostgreSQL
counterpart is tests/multinode/test_tamper_postgres.py."""

from __future__ import annotations

import json
import struct

import lmdb
import pytest

from saihm.commands import main as cli
from saihm.protocol import call as binding_call
from tests.support.cli import one_line_refusal, run_saihm
from tests.support.postgres import lmdb_only

from .conftest import World

pytestmark = lmdb_only("its raw edit opens DATA/lmdb with lmdb.open")


def _insert_leaf(world: World, index: int) -> int:
    """Close the world's store and write a copy of leaf 0 at ``index`` raw; the leaf count."""
    world.store.checkpoint_now()
    world.store.close()
    config = world.config
    env = lmdb.open(str(config.lmdb_dir), max_dbs=64, map_size=config.map_size)
    try:
        db = env.open_db(b"leaves")
        with env.begin(write=True) as txn:
            first = bytes(txn.get(struct.pack(">Q", 0), db=db))
            txn.put(struct.pack(">Q", index), first, db=db)
            entries: int = txn.stat(db)["entries"]
    finally:
        env.close()
    return entries


@pytest.mark.parametrize("index", [2**62, 2**64 - 1])
def test_a_leaf_inserted_far_beyond_the_log_is_one_finding(world: World, capsys, index) -> None:
    holder = world.holder()
    binding_call(world.operator, holder.token, "saihm_remember", {"content": "one"})
    stored = _insert_leaf(world, index)
    config = world.config
    capsys.readouterr()
    code = cli.main(["verify", "--data", str(config.data_dir), "--json", "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    found = [f for f in report["failures"] if f.get("database") == "leaves"]
    assert len(found) == 1 and found[0]["check"] == "log", report["failures"]
    assert f"holds {stored} leaves" in found[0]["what"]


@pytest.mark.parametrize("replace", [False, True])
def test_a_rebuild_of_a_log_with_an_inserted_leaf_refuses_in_one_line(
    world: World, replace: bool
) -> None:
    """``saihm rebuild`` read the log by index up to the claimed size and never ended; it now
    refuses at once, changing nothing (a second check finds the same)."""
    holder = world.holder()
    binding_call(world.operator, holder.token, "saihm_remember", {"content": "one"})
    _insert_leaf(world, 2**62)
    argv = ["rebuild", "--data", str(world.config.data_dir)] + (["--replace"] if replace else [])
    line = one_line_refusal(run_saihm(*argv, timeout=120))
    assert "inserted or deleted" in line
    assert "inserted or deleted" in one_line_refusal(run_saihm(*argv, timeout=120))
