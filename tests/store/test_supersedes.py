"""``saihm_remember`` extension param ``supersedes`` (DESIGN.md "Pinned additions for the third
round"): the old cell is forgotten and the new one remembered in one change, both receipts
logged; bad input answers a clear error and changes nothing. The crash at each step of the
change is tests/store/test_crash_recovery.py ("supersede")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from saihm.errors import SaihmError
from saihm.events import Operation, Receipt
from tests.support.world import World

CHILD = Path(__file__).with_name("_crash_child.py")


def leaves(world: World, since: int = 0) -> list[Receipt]:
    return [Receipt.from_cbor(leaf) for leaf in world.store.leaves(since, world.store.size())]


def code_of(world: World, token: str, **params: object) -> str:
    with pytest.raises(SaihmError) as info:
        world.call(token, "saihm_remember", **params)
    return info.value.code


def test_supersedes_forgets_the_old_cell_and_logs_both_receipts(world: World) -> None:
    a = world.holder()
    wide = world.grant_token(a.holder_id)
    old = world.call(a, "saihm_remember", content="Priya is vegetarian")["cellId"]
    assert [i["cellId"] for i in world.call(wide, "saihm_recall", query="vegetarian")] == [old]
    size = world.store.size()
    new = world.call(
        a, "saihm_remember", content="Priya is pescatarian now", supersedes=old.upper()
    )
    rx = leaves(world, size)
    assert [(r.operation, r.subject_id.hex()) for r in rx] == [
        (Operation.REMEMBER, new["cellId"]),
        (Operation.FORGET, old),
    ]
    assert new["receiptId"] == rx[0].receipt_id.hex()
    with world.store.read_txn() as txn:
        assert not world.store.keyring.has_dek(txn, bytes.fromhex(old))
    for token in (a.token, wide):  # the cached and the item-by-item read
        for query in ("", "vegetarian", "Priya"):
            assert old not in [i["cellId"] for i in world.call(token, "saihm_recall", query=query)]
    assert world.call(a, "saihm_forget", id=old) == {"success": False}


def test_bad_supersedes_is_refused_and_changes_nothing(world: World) -> None:
    a, b = world.holder(), world.holder()
    _, other_session = world.session(a.holder_id)
    mine = world.call(a, "saihm_remember", content="mine")["cellId"]
    theirs = world.call(b, "saihm_remember", content="theirs")["cellId"]
    elsewhere = world.call(other_session, "saihm_remember", content="other session")["cellId"]
    gone = world.call(a, "saihm_remember", content="gone")["cellId"]
    world.call(a, "saihm_forget", id=gone)
    size = world.store.size()
    cases = {
        "not hex": "bad_request",
        mine[:-2]: "bad_request",
        7: "bad_request",
        "00" * 32: "not_found",
        theirs: "not_holder",
        elsewhere: "not_holder",  # a cell of the holder outside this session token's scope
        gone: "erased",
    }
    for supersedes, code in cases.items():
        assert code_of(world, a.token, content="new", supersedes=supersedes) == code, supersedes
    assert world.store.size() == size
    assert [i["plaintext"] for i in world.call(a, "saihm_recall")] == ["mine"]
    assert [i["plaintext"] for i in world.call(b, "saihm_recall")] == ["theirs"]


def test_two_processes_superseding_one_cell_exactly_one_wins(world: World) -> None:
    a = world.holder()
    old = world.call(a, "saihm_remember", content="the old fact")["cellId"]
    size = world.store.size()
    world.store.close()
    children = []
    for n in range(2):
        job = {
            "data": str(world.config.data_dir),
            "now": world.clock.now,
            "token": a.token,
            "method": "saihm_remember",
            "params": {"content": f"new fact {n}", "supersedes": old},
            "step": "never",
        }
        children.append(
            subprocess.Popen(
                [sys.executable, str(CHILD), json.dumps(job)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outcomes = [(c.wait(timeout=120), c.stdout.read(), c.stderr.read()) for c in children]
    for c in children:
        c.stdout.close()
        c.stderr.close()
    world.reopen()
    won = [json.loads(out) for code, out, _err in outcomes if code == 0]
    lost = [err for code, _out, err in outcomes if code != 0]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert "erased" in lost[0]
    rx = leaves(world, size)
    assert [(r.operation, r.subject_id.hex()) for r in rx] == [
        (Operation.REMEMBER, won[0]["cellId"]),
        (Operation.FORGET, old),
    ]
    assert len(world.call(a, "saihm_recall")) == 1
