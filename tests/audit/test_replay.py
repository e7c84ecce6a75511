"""``saihm replay``: a log as a stranger has it (bundle, mirror, URL) into projections or a
dataset, verified first, appended to on each run."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import struct
from pathlib import Path

import lmdb
import pytest

from saihm.audit.mirror import mirror
from saihm.protocol import call as binding_call
from tests.support.cli import run_command

from .conftest import GROWN, World
from .helpers import serving


def _bundle(world: World, name: str = "b.cbor") -> str:
    path = world.root / name
    assert run_command("export", ["--data", str(world.data), "--out", str(path)]) == 0
    return str(path)


def _replay(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = run_command("replay", [*argv, "--no-progress"])
    said = capsys.readouterr()
    assert code != 2, said.err
    out = said.out.strip()
    return code, json.loads(out.splitlines()[-1]) if out else {}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


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
        assert txn.stat(env.open_db(b"holders", txn=txn))["entries"] == 2
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
    code, summary = _replay(capsys, bundle, "--out", str(tmp_path / "l"))
    assert code == 0
    assert verified["proposals"] == summary["proposals"] == 2
    assert summary["erasures"] == verified["erasures"] == 1
    env = lmdb.open(str(tmp_path / "l"), readonly=True, max_dbs=16)
    with env.begin() as txn:
        db = env.open_db(b"tallies", txn=txn)
        tallies = {k.hex(): json.loads(v) for k, v in txn.cursor(db=db).iternext() if len(k) == 32}
    env.close()
    assert tallies[world.proposal_id.hex()] == {"for": 1, "against": 1, "abstain": 0}
    assert tallies[unvoted["proposalId"]] == {"for": 0, "against": 0, "abstain": 0}


def test_replay_jsonl_dataset_matches_the_log(world: World, tmp_path, capsys) -> None:
    code, summary = _replay(
        capsys, _bundle(world), "--out", str(tmp_path / "j"), "--format", "jsonl"
    )
    assert code == 0 and summary["verified"] is True
    assert summary["events"] == summary["newEvents"] == 12 and summary["memories"] == 6
    events = _jsonl(tmp_path / "j" / "events.jsonl")
    assert [e["index"] for e in events] == list(range(12))
    ops = [e["operation"] for e in events]
    assert ops.count("REMEMBER") == 6 and ops.count("KEY") == 2 and ops.count("VOTE") == 2
    # The receipt API's representation: a decimal string of Unix seconds.
    assert all(isinstance(e["timestamp"], str) and e["timestamp"].isdigit() for e in events)
    (propose,) = [e for e in events if e["operation"] == "PROPOSE"]
    assert propose["scope"] == "emission_param" and propose["paramKey"] == "kek_rotation_hours"
    votes = [(e["approve"], e["weight"]) for e in events if e["operation"] == "VOTE"]
    assert [a for a, _ in votes] == [True, False] and all(w.isdigit() for _, w in votes)
    memories = {m["cellId"]: m for m in _jsonl(tmp_path / "j" / "memories.jsonl")}
    gamma = memories[world.cells["gamma"].hex()]
    (forget,) = [e for e in events if e["operation"] == "FORGET"]
    assert gamma["forgotten"] == forget["timestamp"] and gamma["forgottenIndex"] == forget["index"]
    assert gamma["lifetimeSeconds"] == int(gamma["forgotten"]) - int(gamma["remembered"])
    assert gamma["supersededBy"] is None  # a plain forget, not a supersession
    alpha = memories[world.cells["alpha"].hex()]
    assert alpha["forgotten"] is None and alpha["lifetimeSeconds"] is None
    assert (tmp_path / "j" / "shares.jsonl").read_text() == ""


def _share_world(world: World) -> tuple[str, str]:
    """A shares with B, B accepts, A revokes; A supersedes alpha. Returns (contract, new)."""
    op = world.operator()
    try:
        b = binding_call(op, world.token_b, "saihm_status", {})["agentIdHashHex"]
        shared = binding_call(
            op,
            world.token_a1,
            "saihm_share",
            {
                "granteeIdHashesHex": [b],
                "shardIds": [world.cells["beta"].hex()],
                "type": "permanent",
                "scope": "read",
            },
        )
        contract = shared["contractId"]
        binding_call(op, world.token_b, "saihm_accept_contract", {"contractId": contract})
        binding_call(op, world.token_a1, "saihm_revoke_share", {"contractId": contract})
        new = binding_call(
            op,
            world.token_a1,
            "saihm_remember",
            {"content": "alpha, revised", "supersedes": world.cells["alpha"].hex()},
        )["cellId"]
        op.store.checkpoint_now()
    finally:
        op.store.close()
    return contract, new


def test_lifecycle_tables_join_shares_and_supersessions(world: World, tmp_path, capsys) -> None:
    contract, new = _share_world(world)
    out = tmp_path / "c"
    code, summary = _replay(capsys, _bundle(world), "--out", str(out), "--format", "csv")
    assert code == 0 and summary["shares"] == 1
    import csv

    events = list(csv.DictReader((out / "events.csv").open()))
    assert [int(e["index"]) for e in events] == list(range(summary["events"]))
    by_op = {e["operation"]: e for e in events}
    (share,) = csv.DictReader((out / "shares.csv").open())
    assert share["contractId"] == contract
    assert share["fromHolderId"] == by_op["SHARE"]["holderId"]
    assert share["toHolderId"] == by_op["ACCEPT"]["holderId"] != share["fromHolderId"]
    assert share["made"] == by_op["SHARE"]["timestamp"]
    assert share["accepted"] == by_op["ACCEPT"]["timestamp"]
    assert share["revoked"] == by_op["REVOKE"]["timestamp"] and share["declined"] == ""
    memories = {m["cellId"]: m for m in csv.DictReader((out / "memories.csv").open())}
    assert memories[world.cells["alpha"].hex()]["supersededBy"] == new
    assert memories[new]["forgotten"] == ""
    assert memories[world.cells["gamma"].hex()]["supersededBy"] == ""


def test_parquet_dataset_is_typed_and_appends_only_new_events(
    world: World, tmp_path, capsys
) -> None:
    _need("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "p"
    code, first = _replay(capsys, _bundle(world), "--out", str(out), "--format", "parquet")
    assert code == 0 and first["newEvents"] == 12
    events = pq.read_table(out / "events.parquet")
    assert events.num_rows == 12
    assert events.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert events.schema.field("weight").type == pa.uint64()
    assert events.schema.metadata[b"saihm.schema"] == b"1"
    contract, _ = _share_world(world)
    code, second = _replay(
        capsys, _bundle(world, "b2.cbor"), "--out", str(out), "--format", "parquet"
    )
    assert code == 0
    grown = second["events"]
    assert second["newEvents"] == grown - 12 > 0
    parts = sorted(p.name for p in (out / "events.parquet").iterdir())
    assert parts == [f"part-{0:012d}-{12:012d}.parquet", f"part-{12:012d}-{grown:012d}.parquet"]
    events = pq.read_table(out / "events.parquet")
    indexes = events.column("index").to_pylist()
    assert indexes == list(range(grown))  # every leaf once, none twice
    shares = pq.read_table(out / "shares.parquet").to_pylist()
    assert [s["contractId"] for s in shares] == [contract]
    assert shares[0]["revoked"].tzinfo is not None
    memories = pq.read_table(out / "memories.parquet")
    assert memories.num_rows == 7  # the six, and alpha's successor: reflects the full log
    code, third = _replay(
        capsys, _bundle(world, "b3.cbor"), "--out", str(out), "--format", "parquet"
    )
    assert code == 0 and third["newEvents"] == 0
    assert pq.read_table(out / "events.parquet").num_rows == grown


def _need(module: str) -> None:
    """Skip without ``module`` (saihm[research]); under CI=true fail instead."""
    import importlib.util
    import os

    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {module} is missing: pip install 'saihm[research]'")
        pytest.skip(f"{module} is not installed (saihm[research])")


def test_a_run_that_died_before_its_commit_is_not_duplicated(
    world: World, tmp_path, capsys
) -> None:
    out = tmp_path / "j"
    bundle = _bundle(world)
    assert _replay(capsys, bundle, "--out", str(out), "--format", "jsonl")[0] == 0
    # What a run killed after writing events but before committing its state leaves behind.
    with (out / "events.jsonl").open("a") as f:
        f.write('{"index": 12, "half": "written"}\n')
    _share_world(world)
    code, summary = _replay(
        capsys, _bundle(world, "b2.cbor"), "--out", str(out), "--format", "jsonl"
    )
    assert code == 0
    indexes = [e["index"] for e in _jsonl(out / "events.jsonl")]
    assert indexes == list(range(summary["events"]))


def test_another_format_or_another_log_into_the_same_dir_is_refused(
    world: World, tmp_path, capsys
) -> None:
    out = tmp_path / "j"
    bundle = _bundle(world)
    assert _replay(capsys, bundle, "--out", str(out), "--format", "jsonl")[0] == 0
    before = (out / "events.jsonl").read_bytes()
    assert run_command("replay", [bundle, "--out", str(out), "--format", "csv"]) == 2
    assert "holds a jsonl dataset: use --format jsonl" in capsys.readouterr().err
    assert run_command("replay", [bundle, "--out", str(tmp_path / "j" / "events.jsonl")]) == 2
    assert (out / "events.jsonl").read_bytes() == before


def test_a_log_that_rewrote_what_was_replayed_fails_the_next_run(
    world: World, tmp_path, capsys
) -> None:
    """The checkpoint a run reached is held by the next: another log of the same origin (here
    a copy of the data directory that went another way) fails it, and nothing is appended."""
    fork = tmp_path / "fork"
    shutil.copytree(world.root, fork)
    out = tmp_path / "j"
    _share_world(world)
    assert _replay(capsys, _bundle(world), "--out", str(out), "--format", "jsonl")[0] == 0
    before = (out / "events.jsonl").read_bytes()
    other = World(fork, world.config.for_data(fork / "data"), *[None] * 6)  # type: ignore[arg-type]
    op = other.operator()
    try:
        for i in range(20):
            binding_call(op, world.token_b, "saihm_remember", {"content": f"other {i}"})
        op.store.checkpoint_now()
    finally:
        op.store.close()
    code, summary = _replay(capsys, _bundle(other), "--out", str(out), "--format", "jsonl")
    assert code == 1 and summary["verified"] is False and summary["failures"]
    assert (out / "events.jsonl").read_bytes() == before


def test_a_bundle_that_fails_verification_writes_nothing(world: World, tmp_path, capsys) -> None:
    from saihm.audit.bundle import read_bundle, write_bundle

    bundle = read_bundle(_bundle(world))
    leaf = bytearray(bundle.leaves[5])
    leaf[-40] ^= 1  # inside the signature: still a receipt, no longer a valid one
    bundle.leaves[5] = bytes(leaf)
    bad = tmp_path / "bad.cbor"
    write_bundle(bundle, bad)
    code, summary = _replay(capsys, str(bad), "--out", str(tmp_path / "o"), "--format", "jsonl")
    assert code == 1 and summary["written"] == 0 and summary["failures"]
    assert not (tmp_path / "o").exists()
    code, summary = _replay(
        capsys, str(bad), "--out", str(tmp_path / "o"), "--format", "jsonl", "--no-verify"
    )
    assert code == 0 and summary["verified"] is False and "--no-verify" in summary["warning"]
    assert len(_jsonl(tmp_path / "o" / "events.jsonl")) == 12


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda w, t: str(t / "missing.cbor"), "no such file or directory (give an audit bundle"),
        (lambda w, t: str(w.data), "is an operator's data directory: run saihm export --data"),
        (lambda w, t: str(t), "holds no tiled log (no checkpoint file)"),
        (lambda w, t: str(w.keys_file), "is not an audit bundle"),
    ],
    ids=["missing", "data-dir", "other-dir", "not-a-bundle"],
)
def test_what_replay_cannot_read_is_one_line_naming_the_command(
    world: World, tmp_path, capsys, make, needle
) -> None:
    source = make(world, tmp_path)
    capsys.readouterr()
    assert run_command("replay", [source, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


async def test_a_url_that_is_not_a_saihm_log_is_one_line(world: World, tmp_path, capsys) -> None:
    async with serving(world) as (_, url):
        code = await asyncio.to_thread(
            run_command, "replay", [url + "/nothing", "--out", str(tmp_path / "o"), "--no-progress"]
        )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "is not a saihm log (no checkpoint at /checkpoint or /log/checkpoint)" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "o").exists()


async def test_replay_of_a_mirror_directory_and_its_growth(big: World, tmp_path, capsys) -> None:
    target = tmp_path / "m"
    async with serving(big) as (op, url):
        assert (await asyncio.to_thread(mirror, url, target)).ok
        size = op.store.size()
    out = tmp_path / "j"
    code, summary = _replay(capsys, str(target), "--out", str(out), "--format", "jsonl")
    assert code == 0 and summary["events"] == size == 12 + GROWN
    assert [e["index"] for e in _jsonl(out / "events.jsonl")] == list(range(size))
    async with serving(big) as (op, url):
        for i in range(30):
            binding_call(op, big.token_b, "saihm_remember", {"content": f"later {i}"})
        op.store.checkpoint_now()
        assert (await asyncio.to_thread(mirror, url, target)).ok
    code, summary = _replay(capsys, str(target), "--out", str(out), "--format", "jsonl")
    assert code == 0 and summary["newEvents"] == 30 and summary["events"] == size + 30
    assert [e["index"] for e in _jsonl(out / "events.jsonl")] == list(range(size + 30))


def test_parquet_without_pyarrow_says_which_extra(world: World, tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a)
    )
    bundle = _bundle(world)
    capsys.readouterr()
    argv = [bundle, "--out", str(tmp_path / "p"), "--format", "parquet", "--no-progress"]
    assert run_command("replay", argv) == 2
    assert capsys.readouterr().err.strip().endswith("pip install 'saihm[research]'")
    assert not (tmp_path / "p").exists()


async def test_replay_of_a_url_into_lmdb_and_unverified(world: World, tmp_path, capsys) -> None:
    async with serving(world) as (op, url):
        size = op.store.size()
        code = await asyncio.to_thread(
            run_command, "replay", [url, "--out", str(tmp_path / "l"), "--no-progress"]
        )
        assert code == 0
        argv = [url, "--out", str(tmp_path / "j"), "--format", "jsonl", "--no-verify"]
        code = await asyncio.to_thread(run_command, "replay", [*argv, "--no-progress"])
        assert code == 0
    said = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert said[0]["verified"] is True and said[0]["events"] == size
    assert said[1]["verified"] is False and "--no-verify" in said[1]["warning"]
    assert (tmp_path / "l" / ".saihm-replay" / "log" / "checkpoint").is_file()
    assert not (tmp_path / "j" / ".saihm-replay" / "log").exists()  # nothing mirrored
    env = lmdb.open(str(tmp_path / "l"), readonly=True, max_dbs=16)
    with env.begin() as txn:
        assert txn.stat(env.open_db(b"receipts", txn=txn))["entries"] == size
    env.close()
    assert len(_jsonl(tmp_path / "j" / "events.jsonl")) == size


def _swap_two_leaves(root: Path) -> None:
    """In every entry bundle under ``root``, swap two different leaves of one length: the
    framing and every length stay, the order (so the tree) does not."""
    from saihm.translog.tiles import decode_entry_bundle

    changed = 0
    for path in sorted((root / "tile" / "entries").rglob("*")):
        if not path.is_file():
            continue
        leaves = decode_entry_bundle(path.read_bytes())
        pairs = [
            (i, j)
            for i in range(len(leaves))
            for j in range(i + 1, len(leaves))
            if len(leaves[i]) == len(leaves[j]) and leaves[i] != leaves[j]
        ]
        i, j = pairs[0]
        leaves[i], leaves[j] = leaves[j], leaves[i]
        path.chmod(0o644)
        path.write_bytes(b"".join(len(x).to_bytes(2, "big") + x for x in leaves))
        changed += 1
    assert changed


def _edit_after_verification(monkeypatch, root: Path) -> None:
    """Swap leaves under ``root`` between replay's verify pass and its replay pass."""
    from saihm.audit import replay

    real = replay._phase_one

    def then_edit(*args: object) -> object:
        verified = real(*args)  # type: ignore[arg-type]
        _swap_two_leaves(root)
        return verified

    monkeypatch.setattr(replay, "_phase_one", then_edit)


def _one_line_failure(capsys, argv: list[str]) -> dict:
    capsys.readouterr()
    code = run_command("replay", [*argv, "--no-progress"])
    said = capsys.readouterr()
    assert code == 1, said.err
    lines = said.out.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in said.err
    summary = json.loads(lines[0])
    assert summary["verified"] is False and summary["written"] == 0
    return summary


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "lmdb"])
async def test_a_directory_changed_after_it_was_verified_is_not_replayed(
    world: World, tmp_path, capsys, monkeypatch, fmt
) -> None:
    """The replay pass hashes the leaves it reads and must reach the root the verify pass
    verified: a leaf swapped in between (another mirror run, an attacker) writes nothing,
    not even the events of a part flushed before the end (every 4 leaves here)."""
    from saihm.audit import replay

    if fmt == "parquet":
        _need("pyarrow")
    monkeypatch.setattr(replay, "COMMIT_EVERY", 4)
    target = tmp_path / "m"
    async with serving(world) as (_, url):
        assert (await asyncio.to_thread(mirror, url, target)).ok
    _edit_after_verification(monkeypatch, target)
    out = tmp_path / "o"
    summary = _one_line_failure(capsys, [str(target), "--out", str(out), "--format", fmt])
    assert "changed after it was verified" in summary["failures"][0]
    assert not (out / "events.jsonl").exists() and not (out / "data.mdb").exists()
    assert not list(out.glob("events.parquet/*"))


async def test_a_url_mirror_changed_after_it_was_verified_is_not_replayed(
    world: World, tmp_path, capsys, monkeypatch
) -> None:
    out = tmp_path / "o"
    _edit_after_verification(monkeypatch, out / ".saihm-replay" / "log")
    async with serving(world) as (_, url):
        argv = [url, "--out", str(out), "--format", "jsonl"]
        summary = await asyncio.to_thread(_one_line_failure, capsys, argv)
    assert "changed after it was verified" in summary["failures"][0]
    assert not (out / "events.jsonl").exists()


async def test_a_resumed_run_checks_the_events_held_against_the_new_checkpoint(
    world: World, tmp_path, capsys
) -> None:
    """Events an earlier run wrote (here unverified, from a doctored copy of the directory)
    must be a prefix of the log the next run verifies: their tree, extended by the new
    leaves, must hash to the new checkpoint's root, or nothing is appended."""
    honest, doctored = tmp_path / "m", tmp_path / "d"
    async with serving(world) as (_, url):
        assert (await asyncio.to_thread(mirror, url, honest)).ok
    shutil.copytree(honest, doctored)
    _swap_two_leaves(doctored)
    out = tmp_path / "o"
    argv = ["--out", str(out), "--format", "jsonl"]
    assert _replay(capsys, str(doctored), *argv, "--no-verify")[0] == 0
    before = (out / "events.jsonl").read_bytes()
    async with serving(world) as (op, url):
        for i in range(5):
            binding_call(op, world.token_b, "saihm_remember", {"content": f"later {i}"})
        op.store.checkpoint_now()
        assert (await asyncio.to_thread(mirror, url, honest)).ok
    summary = _one_line_failure(capsys, [str(honest), *argv])
    assert "events already in" in summary["failures"][0]
    assert (out / "events.jsonl").read_bytes() == before
    # The honest directory into a new DIR replays; so does a rerun whose state predates the
    # kept tree (the events' prefix is then hashed from the source).
    fresh = ["--out", str(tmp_path / "f"), "--format", "jsonl"]
    assert _replay(capsys, str(honest), *fresh)[0] == 0
    db = sqlite3.connect(tmp_path / "f" / ".saihm-replay" / "state.sqlite")
    with db:
        assert db.execute("DELETE FROM meta WHERE key = 'tree'").rowcount == 1
    db.close()
    code, summary = _replay(capsys, str(honest), *fresh)
    assert code == 0 and summary["newEvents"] == 0 and summary["events"] == 17
