"""The verifier on an honest log: export, offline verification on another machine, options."""

from __future__ import annotations

import shutil

import cbor2
import pytest

from saihm.audit.bundle import Bundle, read_bundle
from saihm.errors import MalformedInput
from tests.support.cli import run_command

from .helpers import run_verify


def test_honest_data_dir_verifies_with_every_check(world, capsys) -> None:
    code, report = run_verify(capsys, "--data", str(world.data), "--trust", str(world.keys_file))
    assert code == 0, report["failures"]
    assert report["keys_pinned"] is True
    assert report["leaves"] == report["receipts"] == report["signatures"] == 12
    assert report["checkpoints"] >= 3 and report["consistency_proofs"] == report["checkpoints"] - 1
    assert report["erasures"] == 1 and report["proposals"] == 1
    assert report["cells"] == 6


def test_bundle_verifies_on_another_machine_with_only_bundle_and_pinned_keys(
    world, tmp_path, capsys
) -> None:
    bundle = world.root / "bundle.cbor"
    assert (
        run_command("export", ["--data", str(world.data), "--out", str(bundle), "--with-cells"])
        == 0
    )
    latest = read_bundle(bundle).checkpoints[-1][1]
    # The "other machine": the bundle, the pinned key file and a held checkpoint; nothing else.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(bundle, elsewhere / "bundle.cbor")
    shutil.copy(world.keys_file, elsewhere / "keys.txt")
    (elsewhere / "held.note").write_bytes(latest)
    shutil.rmtree(world.root)
    code, report = run_verify(
        capsys,
        str(elsewhere / "bundle.cbor"),
        "--trust",
        str(elsewhere / "keys.txt"),
        "--checkpoint",
        str(elsewhere / "held.note"),
        "--second-implementation",
    )
    assert code == 0, report["failures"]
    assert report["held_checkpoints"] == 1 and report["second_implementation"]
    assert report["cells"] == 6


def test_bundle_holds_no_secrets(world) -> None:
    bundle = world.root / "b.cbor"
    run_command("export", ["--data", str(world.data), "--out", str(bundle), "--with-cells"])
    raw = bundle.read_bytes()
    assert b"alpha memory" not in raw and world.old_dek_gamma not in raw
    for kek in (world.root / "kek").rglob("*"):
        secret = kek.read_bytes().strip() if kek.is_file() else b""
        if len(secret) >= 16:
            assert secret not in raw
    env = world.env()
    with env.begin() as txn:
        for name in (b"bodies", b"seeds", b"deks"):
            for _, value in txn.cursor(db=env.open_db(name, txn=txn)).iternext():
                m = cbor2.loads(bytes(value)) if name == b"bodies" else {2: bytes(value)}
                assert m.get(2) is None or m[2] not in raw  # session tags, seeds, wrapped DEKs
    env.close()
    m = cbor2.loads(raw)
    assert set(m) == {
        "format",
        "origin",
        "leaves",
        "checkpoints",
        "logKeys",
        "authorityPublicKey",
        "erasures",
        "erasuresTreeSize",
        "tallies",
        "cells",
        "contracts",
    }


def test_unpinned_keys_are_reported(world, capsys) -> None:
    code, report = run_verify(capsys, "--data", str(world.data))
    assert code == 0
    assert report["keys_pinned"] is False
    run_command("verify", ["--data", str(world.data), "--no-progress"])
    assert "NOT independently pinned" in capsys.readouterr().out


def test_workers_and_second_implementation_agree(world, capsys) -> None:
    code, report = run_verify(
        capsys, "--data", str(world.data), "--workers", "2", "--second-implementation"
    )
    assert code == 0 and report["signatures"] == 12


def test_malformed_bundle_is_refused_before_verification(tmp_path) -> None:
    path = tmp_path / "x.cbor"
    path.write_bytes(cbor2.dumps({"format": "saihm-audit-bundle/1"}))
    with pytest.raises(MalformedInput):
        read_bundle(path)
    assert run_command("verify", [str(path), "--no-progress"]) == 2


def test_bundle_round_trips_deterministically(world) -> None:
    bundle = world.root / "b.cbor"
    run_command("export", ["--data", str(world.data), "--out", str(bundle)])
    raw = bundle.read_bytes()
    assert Bundle.from_cbor(raw).to_cbor() == raw


def test_signed_bytes_cut_from_leaf_equal_reencoding(world) -> None:
    from saihm.audit.leafcheck import signed_bytes as _signed_bytes
    from saihm.events import Receipt, receipt_signed_bytes

    from .helpers import leaves

    for leaf in leaves(world.lmdb_dir):
        receipt = Receipt.from_cbor(leaf)
        assert _signed_bytes(leaf, receipt) == receipt_signed_bytes(receipt)
