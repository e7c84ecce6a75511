"""The cache of verified cells and the per-holder index (docs/retrieval.md "The cache").

"Every returned item still passes the per-item check against the caller's access on every
call; only the signature check, cellId recomputation and decryption are skipped for cells
already verified" — and the cache follows the log: a change is reflected before it is
acknowledged in this process, and before the next read in another process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import saihm.store.read.reader as store_module
from saihm.projections import apply as P
from saihm.projections.keys import u64
from tests.support.world import World, make_world

CHILD = Path(__file__).with_name("_crash_child.py")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every cellId the store decrypts, in order."""
    seen: list[bytes] = []
    real = store_module.decrypt

    def decrypt(cell, dek):
        seen.append(cell.cell_id)
        return real(cell, dek)

    monkeypatch.setattr(store_module, "decrypt", decrypt)
    return seen


def ids(world: World, token: str, **params: object) -> list[str]:
    return [item["cellId"] for item in world.call(token, "saihm_recall", **params)]


def in_child(world: World, token: str, method: str, params: dict) -> dict:
    """Run one call in another process on the same data directory (its own store)."""
    job = {
        "data": str(world.config.data_dir),
        "now": world.clock.now,
        "token": token,
        "method": method,
        "params": params,
        "step": "never",
    }
    done = subprocess.run(
        [sys.executable, str(CHILD), json.dumps(job)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_verified_cell_is_not_verified_or_decrypted_again(world: World, counted) -> None:
    a = world.holder()
    cid = world.call(a, "saihm_remember", content="alpha river")["cellId"]
    wide = world.grant_token(a.holder_id)
    first = world.call(wide, "saihm_recall")
    assert counted == [bytes.fromhex(cid)]
    for token in (wide, a.token):
        for query in ("", "river", "alpha"):
            assert ids(world, token, query=query) == [cid]
    assert counted == [bytes.fromhex(cid)], "a cached cell was decrypted again"
    assert world.call(wide, "saihm_recall") == first


def test_forget_is_reflected_before_it_is_acknowledged(world: World) -> None:
    a = world.holder()
    wide = world.grant_token(a.holder_id)
    cid = bytes.fromhex(world.call(a, "saihm_remember", content="to be erased")["cellId"])
    assert ids(world, wide) == [cid.hex()]
    cache = world.store.reader.cache
    assert cid in cache._entries
    assert world.call(a, "saihm_forget", id=cid.hex())["success"] is True
    # Nothing was read since the FORGET: the commit itself dropped the plaintext.
    assert cid not in cache._entries
    assert cid in cache._erased
    assert cid not in cache._holders[a.holder_id].texts
    assert ids(world, wide) == [] and ids(world, a.token) == []


def test_another_process_forget_is_seen_before_the_next_read(world: World) -> None:
    a = world.holder()
    wide = world.grant_token(a.holder_id)
    keep = world.call(a, "saihm_remember", content="kept")["cellId"]
    gone = world.call(a, "saihm_remember", content="erased elsewhere")["cellId"]
    assert ids(world, wide) == [keep, gone]
    assert in_child(world, a.token, "saihm_forget", {"id": gone})["success"] is True
    assert ids(world, wide) == [keep]
    assert ids(world, wide, query="erased") == []
    assert bytes.fromhex(gone) not in world.store.reader.cache._entries


def test_another_process_remember_is_seen_by_the_holder_wide_index(world: World) -> None:
    a = world.holder()
    wide = world.grant_token(a.holder_id)
    first = world.call(a, "saihm_remember", content="first note")["cellId"]
    assert ids(world, wide) == [first]
    second = in_child(world, a.token, "saihm_remember", {"content": "second note"})["cellId"]
    assert ids(world, wide) == [first, second]
    assert ids(world, wide, query="second") == [second]


def test_kek_rotation_empties_the_cache_here_and_in_other_processes(world: World, counted) -> None:
    a = world.holder()
    wide = world.grant_token(a.holder_id)
    cid = world.call(a, "saihm_remember", content="rotating")["cellId"]
    ids(world, wide)
    world.store.rotate_kek()
    assert len(world.store.reader.cache) == 0
    assert ids(world, wide) == [cid]
    assert counted.count(bytes.fromhex(cid)) == 2
    # A rotation by another process (saihm kek rotate) is seen at the next read.
    cli = "import sys; from saihm.commands.main import main; sys.exit(main(sys.argv[1:]))"
    argv = [sys.executable, "-c", cli, "kek", "rotate", "--data", str(world.config.data_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ids(world, wide) == [cid]
    assert counted.count(bytes.fromhex(cid)) == 3


def test_revoke_drops_covered_cells_and_the_grantee_stops_seeing_them(world: World) -> None:
    a, b = world.holder(), world.holder()
    cid = world.call(a, "saihm_remember", content="shared note")["cellId"]
    contract = world.call(
        a,
        "saihm_share",
        granteeIdHashesHex=[b.hex],
        shardIds=[cid],
        type="permanent",
        scope="read",
        expiryEpoch=None,
    )["contractId"]
    assert ids(world, b.token) == []  # not accepted yet
    world.call(b, "saihm_accept_contract", contractId=contract)
    b_wide = world.grant_token(b.holder_id)
    assert ids(world, b.token) == [cid] and ids(world, b_wide) == [cid]
    assert bytes.fromhex(cid) in world.store.reader.cache._entries
    world.call(a, "saihm_revoke_share", contractId=contract)
    assert bytes.fromhex(cid) not in world.store.reader.cache._entries
    assert ids(world, b.token) == [] and ids(world, b_wide) == []
    assert ids(world, a.token) == [cid]


def test_an_expired_contract_stops_serving_a_cached_cell(world: World) -> None:
    a, b = world.holder(), world.holder()
    cid = world.call(a, "saihm_remember", content="for a day")["cellId"]
    contract = world.call(
        a,
        "saihm_share",
        granteeIdHashesHex=[b.hex],
        shardIds=[cid],
        type="temporary",
        scope="read",
        expiryEpoch=None,
    )["contractId"]
    world.call(b, "saihm_accept_contract", contractId=contract)
    b_wide = world.grant_token(b.holder_id)
    assert ids(world, b_wide) == [cid]
    world.clock.now += 86_401
    b_wide = world.grant_token(b.holder_id)
    assert ids(world, b_wide) == [] and ids(world, world.session(b.holder_id)[1]) == []


def test_every_item_is_checked_against_the_caller_on_every_call(world: World) -> None:
    a, b = world.holder(), world.holder()
    _s2, t2 = world.session(a.holder_id)
    mine = world.call(a, "saihm_remember", content="session one river")["cellId"]
    other = world.call(t2, "saihm_remember", content="session two river")["cellId"]
    work = world.call(a, "saihm_remember", content="work river", namespace="work")["cellId"]
    wide = world.grant_token(a.holder_id)
    assert set(ids(world, wide)) == {mine, other, work}  # everything is cached now
    assert set(ids(world, a.token, query="river")) == {mine, work}
    assert ids(world, t2, query="river") == [other]
    assert ids(world, world.grant_token(a.holder_id, ["work"]), query="river") == [work]
    assert ids(world, b.token, query="river") == []
    assert ids(world, world.grant_token(b.holder_id)) == []


def test_the_bound_holds_and_answers_stay_complete(tmp_path: Path) -> None:
    world = make_world(tmp_path, recall_cache_mb=1)
    try:
        a = world.holder()
        wide = world.grant_token(a.holder_id)
        made = [
            world.call(a, "saihm_remember", content=f"cell {i} " + "word " * 2000)["cellId"]
            for i in range(60)
        ]
        for query in ("", "cell", "59"):
            got = ids(world, wide, query=query)
            assert set(got) == (set(made) if query != "59" else {made[59]})
            assert world.store.reader.cache.used_bytes <= 1 << 20
    finally:
        world.store.close()


def test_cache_off_answers_exactly_like_cache_on(tmp_path: Path) -> None:
    worlds = [make_world(tmp_path / "on"), make_world(tmp_path / "off", recall_cache_mb=0)]
    try:
        answers = []
        for world in worlds:
            a = world.holder()
            for text in ("dark mode please", "the user likes tea", "meeting at noon", "x"):
                world.call(a, "saihm_remember", content=text)
            wide = world.grant_token(a.holder_id)
            got = []
            for token in (wide, a.token):
                for query in ("", "user", "what theme does the user like", "noon tea", "zz"):
                    result = world.call(token, "saihm_recall", query=query)
                    got.append([(i["plaintext"], i.get("score")) for i in result])
            answers.append(got)
        assert answers[0] == answers[1]
        assert len(worlds[1].store.reader.cache) == 0
    finally:
        for world in worlds:
            world.store.close()


def test_a_read_of_an_older_snapshot_adds_nothing_to_the_cache(world: World) -> None:
    a = world.holder()
    cid = bytes.fromhex(world.call(a, "saihm_remember", content="old snapshot")["cellId"])
    store = world.store
    with store.storage.read() as old:
        world.call(a, "saihm_forget", id=cid.hex())
        with store.reader.cache.reading(old, store.tree, store.kek_dir.current_version) as view:
            assert not view.current
            assert cid in view.erased()


def test_a_forged_index_entry_does_not_serve_another_holders_cell(world: World) -> None:
    """An attacker with raw LMDB access files B's cell under A in the by-holder index."""
    a, b = world.holder(), world.holder()
    world.call(a, "saihm_remember", content="a's own")
    theirs = bytes.fromhex(world.call(b, "saihm_remember", content="b's secret")["cellId"])
    b_wide = world.grant_token(b.holder_id)
    assert ids(world, b_wide) == [theirs.hex()]  # cached, verified, owned by B
    store = world.store
    with store.storage.write() as txn:
        txn.put(a.holder_id + u64(10**6), theirs, db=store.projections.db[P.BY_HOLDER])
    store.reader.cache.clear()
    ids(world, b_wide)  # B's cell is in the cache again before A's holder-wide read
    a_wide = world.grant_token(a.holder_id)
    for query in ("", "secret", "b's"):
        got = world.call(a_wide, "saihm_recall", query=query)
        assert all(item["plaintext"] != "b's secret" for item in got)


def test_a_bound_smaller_than_one_holder_still_answers_everything(tmp_path: Path) -> None:
    """The cell lists alone outgrow the bound: holder-wide reads fall back, shared cells too."""
    world = make_world(tmp_path, recall_cache_mb=1)
    try:
        a, b = world.holder(), world.holder()
        made = [
            world.call(a, "saihm_remember", content=f"river {i} " + "w " * 2000)["cellId"]
            for i in range(40)
        ]
        world.share_accepted(a, b, made[:5])
        for i in range(40):
            world.call(b, "saihm_remember", content=f"own {i} " + "v " * 2000)
        b_wide, a_wide = world.grant_token(b.holder_id), world.grant_token(a.holder_id)
        for _ in range(2):
            assert len(ids(world, b_wide)) == 45
            assert set(ids(world, b_wide, query="river")) == set(made[:5])
            assert set(ids(world, a_wide)) == set(made)
            assert world.store.reader.cache.used_bytes <= 1 << 20
    finally:
        world.store.close()
