"""``saihm replay``: the public projections of a bundle, in LMDB and JSONL."""

from __future__ import annotations

import json
import struct

import lmdb

from saihm.protocol import call as binding_call
from tests.support.cli import run_command

from .conftest import World


def _bundle(world: World) -> str:
    path = world.root / "b.cbor"
    assert run_command("export", ["--data", str(world.data), "--out", str(path)]) == 0
    return str(path)


def test_replay_jsonl_matches_the_log(world: World, tmp_path, capsys) -> None:
    bundle = _bundle(world)
    capsys.readouterr()
    out = tmp_path / "j"
    assert (
        run_command("replay", [bundle, "--out", str(out), "--format", "jsonl", "--no-progress"])
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["events"] == 12 and summary["eventsPerSecond"] > 0
    receipts = [json.loads(x) for x in (out / "receipts.jsonl").read_text().splitlines()]
    assert [r["index"] for r in receipts] == list(range(12))
    assert [r["operation"] for r in receipts].count("REMEMBER") == 6
    erasures = [json.loads(x) for x in (out / "erasures.jsonl").read_text().splitlines()]
    assert [e["cellId"] for e in erasures] == [world.cells["gamma"].hex()]
    (tally,) = [json.loads(x) for x in (out / "tallies.jsonl").read_text().splitlines()]
    assert tally["proposalId"] == world.proposal_id.hex()
    assert (tally["for"], tally["against"], tally["abstain"]) == (1, 1, 0)
    assert len((out / "holders.jsonl").read_text().splitlines()) == 2


def test_replay_lmdb_indexes(world: World, tmp_path) -> None:
    out = tmp_path / "l"
    assert run_command("replay", [_bundle(world), "--out", str(out), "--no-progress"]) == 0
    env = lmdb.open(str(out), readonly=True, max_dbs=16)
    with env.begin() as txn:
        by_op = env.open_db(b"by_operation", txn=txn)
        forgets = [k for k, _ in txn.cursor(db=by_op).iternext() if k.startswith(b"FORGET\x00")]
        assert len(forgets) == 1
        index = struct.unpack(">Q", forgets[0][-8:])[0]
        erasures = env.open_db(b"erasures", txn=txn)
        assert struct.unpack(">Q", txn.get(world.cells["gamma"], db=erasures))[0] == index
        receipt = json.loads(
            txn.get(struct.pack(">Q", index), db=env.open_db(b"receipts", txn=txn))
        )
        assert receipt["subjectId"] == world.cells["gamma"].hex()
    env.close()


def test_replay_tallies_every_proposal_verify_counts(world: World, tmp_path, capsys) -> None:
    """A proposal nobody has voted on yet is a proposal in ``saihm verify``'s count, so replay
    writes a 0/0/0 tally for it: the two tools' tallies agree."""
    op = world.operator()
    try:
        unvoted = binding_call(
            op, world.token_b, "saihm_governance_propose", {"scope": "protocol_upgrade"}
        )
    finally:
        op.store.close()
    bundle = _bundle(world)
    capsys.readouterr()
    assert run_command("verify", [bundle, "--json", "--no-progress"]) == 0
    verified = json.loads(capsys.readouterr().out)
    out = tmp_path / "j"
    assert (
        run_command("replay", [bundle, "--out", str(out), "--format", "jsonl", "--no-progress"])
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    tallies = [json.loads(x) for x in (out / "tallies.jsonl").read_text().splitlines()]
    assert len(tallies) == verified["proposals"] == summary["proposals"] == 2
    assert summary["erasures"] == verified["erasures"] == 1
    by_id = {t["proposalId"]: (t["for"], t["against"], t["abstain"]) for t in tallies}
    assert by_id == {world.proposal_id.hex(): (1, 1, 0), unvoted["proposalId"]: (0, 0, 0)}
    lmdb_out = tmp_path / "l"
    assert run_command("replay", [bundle, "--out", str(lmdb_out), "--no-progress"]) == 0
    env = lmdb.open(str(lmdb_out), readonly=True, max_dbs=16)
    with env.begin() as txn:
        db = env.open_db(b"tallies", txn=txn)
        assert txn.stat(db)["entries"] == 2
    env.close()
