"""Attacks by someone with raw write access to the LMDB environment (requirements.txt,
"Security considerations"). Each must be caught by ``saihm verify``; where it touches a served
cell, the store must refuse it too. docs/security.md lists these tests by name.
"""

from __future__ import annotations

import struct

import cbor2
import pytest

from saihm.store import StaleProjections
from saihm.translog import Checkpoint, LogKeys

from .conftest import World, u64
from .helpers import find_leaf, first_failure, leaves, rewrite_log, run_verify

_U64 = struct.Struct(">Q")


def _pinned(world: World) -> list[str]:
    return ["--data", str(world.data), "--trust", str(world.keys_file)]


def _plaintexts(world: World, token: str) -> set[str]:
    return {item["plaintext"] for item in world.recall(token)}


def _latest_note(world: World) -> bytes:
    env = world.env()
    with env.begin() as txn:
        cur = txn.cursor(db=env.open_db(b"checkpoints", txn=txn))
        cur.last()
        note = bytes(cur.value())
    env.close()
    return note


def test_edit_one_byte_of_a_leaf(world: World, capsys) -> None:
    index = find_leaf(world.lmdb_dir, "REMEMBER", world.cells["beta"])
    leaf = bytearray(leaves(world.lmdb_dir)[index])
    leaf[leaf.index(world.cells["beta"]) + 5] ^= 0x01  # one bit of the subjectId
    env = world.env()
    with env.begin(write=True) as txn:
        txn.put(u64(index), bytes(leaf), db=env.open_db(b"leaves", txn=txn))
    env.close()
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    assert first_failure(report)["index"] == index
    assert first_failure(report)["check"] == "receipt id"
    assert any(f["check"] == "root" for f in report["failures"])  # tree no longer matches


def test_delete_a_leaf(world: World, capsys) -> None:
    index = find_leaf(world.lmdb_dir, "REMEMBER", world.cells["delta"])
    env = world.env()
    with env.begin(write=True) as txn:
        assert txn.delete(u64(index), db=env.open_db(b"leaves", txn=txn))
    env.close()
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    assert first_failure(report) == {
        "check": "leaves",
        "what": f"leaf {index} is missing",
        "index": index,
    }
    assert any(f["check"] == "root" for f in report["failures"])


def test_swap_two_leaves(world: World, capsys) -> None:
    i = find_leaf(world.lmdb_dir, "REMEMBER", world.cells["alpha"])
    j = find_leaf(world.lmdb_dir, "REMEMBER", world.cells["beta"])
    all_leaves = leaves(world.lmdb_dir)
    env = world.env()
    with env.begin(write=True) as txn:
        db = env.open_db(b"leaves", txn=txn)
        txn.put(u64(i), all_leaves[j], db=db)
        txn.put(u64(j), all_leaves[i], db=db)
    env.close()
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    # Each receipt is still validly signed: the signed roots are what catch the reordering.
    assert all(f["check"] == "root" for f in report["failures"])
    assert first_failure(report)["index"] <= i


def test_truncate_last_leaves_caught_with_held_checkpoint(world: World, tmp_path, capsys) -> None:
    held = tmp_path / "held.note"
    held.write_bytes(_latest_note(world))  # what a monitor mirrored earlier
    all_leaves = leaves(world.lmdb_dir)
    k = 2  # the two VOTE receipts
    env = world.env()
    rewrite_log(env, world.data, all_leaves[:-k])
    with env.begin(write=True) as txn:  # and the tallies they produced
        txn.drop(env.open_db(b"p_tallies", txn=txn), delete=False)
    env.close()
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 0  # a consistent, re-signed shorter log: only an outside copy can tell
    code, report = run_verify(capsys, *_pinned(world), "--checkpoint", str(held))
    assert code == 1
    assert first_failure(report)["check"] == "truncation"
    assert first_failure(report)["index"] == len(all_leaves) - k


def test_checkpoint_resigned_under_foreign_key(world: World, capsys) -> None:
    foreign = LogKeys.generate(world.config.origin)
    env = world.env()
    with env.begin(write=True) as txn:
        db = env.open_db(b"checkpoints", txn=txn)
        for key, note in list(txn.cursor(db=db).iternext()):
            body = bytes(note).split(b"\n\n")[0] + b"\n"
            cp = Checkpoint.parse(body)
            txn.put(key, foreign.sign(cp), db=db)
    env.close()
    # The attacker also replaces the verifier keys in the data directory ...
    world.keys_file.rename(world.keys_file.with_suffix(".orig"))
    world.keys_file.write_text("".join(k + "\n" for k in foreign.verifier_keys()))
    code, report = run_verify(capsys, "--data", str(world.data))
    assert code == 0 and report["keys_pinned"] is False  # ... so unpinned keys cannot tell
    code, report = run_verify(
        capsys, "--data", str(world.data), "--trust", str(world.keys_file.with_suffix(".orig"))
    )
    assert code == 1
    assert {f["check"] for f in report["failures"]} == {"checkpoint"}
    assert "no known key" in first_failure(report)["what"] or report["checkpoints"] == 0


def test_swap_two_cells_bodies(world: World, capsys) -> None:
    a, b = world.cells["alpha"], world.cells["beta"]
    env = world.env()
    with env.begin(write=True) as txn:
        db = env.open_db(b"bodies", txn=txn)
        body_a, body_b = bytes(txn.get(a, db=db)), bytes(txn.get(b, db=db))
        txn.put(a, body_b, db=db)
        txn.put(b, body_a, db=db)
    env.close()
    assert _plaintexts(world, world.token_a1) == {"delta memory"}  # the store refuses both
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    cells = [f for f in report["failures"] if f["check"] == "cell"]
    assert len(cells) == 2 and all("swapped or moved" in f["what"] for f in cells)
    assert first_failure(report)["index"] == find_leaf(world.lmdb_dir, "REMEMBER", a)


def test_move_cell_to_another_session(world: World, capsys) -> None:
    alpha = world.cells["alpha"]
    env = world.env()
    with env.begin(write=True) as txn:
        cells = env.open_db(b"p_cells", txn=txn)
        by_session = env.open_db(b"p_cells_by_session", txn=txn)
        bodies = env.open_db(b"bodies", txn=txn)
        alpha_rec = cbor2.loads(bytes(txn.get(alpha, db=cells)))
        eps_rec = cbor2.loads(bytes(txn.get(world.cells["epsilon"], db=cells)))
        # Every index and tag says alpha belongs to session S2.
        txn.delete(alpha_rec[6] + u64(alpha_rec[5]), db=by_session)
        txn.put(eps_rec[6] + u64(alpha_rec[5]), alpha, db=by_session)
        alpha_rec[6] = eps_rec[6]
        txn.put(alpha, cbor2.dumps(alpha_rec, canonical=True), db=cells)
        body = cbor2.loads(bytes(txn.get(alpha, db=bodies)))
        body[2] = eps_rec[6]
        txn.put(alpha, cbor2.dumps(body, canonical=True), db=bodies)
    env.close()
    # The sealed label inside the ciphertext still says S1: the store's label check refuses.
    assert _plaintexts(world, world.token_a2) == {"epsilon memory"}
    # The public record is intact (an index is not evidence): verification still holds, and
    # the cell's id and signature, which bind the sealed label, still verify.
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 0 and report["cells"] == 6


def test_restore_erased_dek_after_rotation(world: World, capsys) -> None:
    gamma = world.cells["gamma"]
    env = world.env()
    with env.begin(write=True) as txn:
        cells = env.open_db(b"p_cells", txn=txn)
        record = cbor2.loads(bytes(txn.get(gamma, db=cells)))
        txn.put(gamma, world.old_dek_gamma, db=env.open_db(b"deks", txn=txn))  # old backup
        txn.delete(gamma, db=env.open_db(b"p_erasures", txn=txn))
        del record[7]
        txn.put(gamma, cbor2.dumps(record, canonical=True), db=cells)
        txn.put(record[6] + u64(record[5]), gamma, db=env.open_db(b"p_cells_by_session", txn=txn))
        txn.put(record[1] + u64(record[5]), gamma, db=env.open_db(b"p_cells_by_holder", txn=txn))
    env.close()
    # The KEK generation that wrapped the old DEK was retired at rotation: nothing decrypts.
    assert "gamma memory" not in _plaintexts(world, world.token_a1)
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    forget = find_leaf(world.lmdb_dir, "FORGET", gamma)
    assert first_failure(report)["check"] == "erasures"
    assert first_failure(report)["index"] == forget
    assert "missing from the published erasure list" in first_failure(report)["what"]


def test_rewrite_vote_weight(world: World, capsys) -> None:
    index = find_leaf(world.lmdb_dir, "VOTE")
    m = cbor2.loads(leaves(world.lmdb_dir)[index])
    m[7]["weight"] = 1000
    env = world.env()
    with env.begin(write=True) as txn:
        txn.put(u64(index), cbor2.dumps(m, canonical=True), db=env.open_db(b"leaves", txn=txn))
        tallies = env.open_db(b"p_tallies", txn=txn)
        tally = cbor2.loads(bytes(txn.get(world.proposal_id, db=tallies)))
        tally[1] += 999
        txn.put(world.proposal_id, cbor2.dumps(tally, canonical=True), db=tallies)
    env.close()
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    assert first_failure(report)["index"] == index
    assert first_failure(report)["check"] in {"receipt id", "encoding"}


def test_rewrite_vote_weight_even_with_tree_recomputed_and_resigned(world: World, capsys) -> None:
    index = find_leaf(world.lmdb_dir, "VOTE")
    all_leaves = leaves(world.lmdb_dir)
    m = cbor2.loads(all_leaves[index])
    m[7]["weight"] = 1000
    all_leaves[index] = cbor2.dumps(m, canonical=True)
    env = world.env()
    rewrite_log(env, world.data, all_leaves)
    env.close()
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    assert first_failure(report)["index"] == index  # the holder's signature cannot be forged
    assert any(f["check"] == "tallies" for f in report["failures"])


def test_drop_forget_receipt_keep_erasure(world: World, tmp_path, capsys) -> None:
    held = tmp_path / "held.note"
    held.write_bytes(_latest_note(world))
    gamma = world.cells["gamma"]
    forget = find_leaf(world.lmdb_dir, "FORGET", gamma)
    all_leaves = leaves(world.lmdb_dir)
    env = world.env()
    rewrite_log(env, world.data, all_leaves[:forget] + all_leaves[forget + 1 :])
    env.close()
    # The projections now reflect more leaves than the log holds: the store refuses to serve.
    with pytest.raises(StaleProjections, match="rebuild --data DIR --replace"):
        _plaintexts(world, world.token_a1)
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    assert first_failure(report)["check"] == "erasures"
    assert gamma.hex() in first_failure(report)["what"]
    assert "no FORGET receipt" in first_failure(report)["what"]
    code, report = run_verify(capsys, *_pinned(world), "--checkpoint", str(held))
    # The log is one leaf shorter than the held checkpoint (nothing was appended since).
    assert any(f["check"] == "truncation" for f in report["failures"])
