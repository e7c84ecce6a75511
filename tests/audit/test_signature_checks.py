"""Tampers that only a signature check can catch (issue 32, item 11).

Each test changes nothing but a signature: the receiptId or contractId still is SHA-256 of the
signed bytes (the signature is not among them), every other field is intact, and the tree and
checkpoints are recomputed and re-signed with the log keys (``rewrite_log``), so the receipt-id,
leaf, root and checkpoint checks all pass. The report must then name exactly one failure, of
the one check that can see it: ``signature`` for a receipt (saihm/audit/sigcheck.py; with
``--second-implementation`` also pqcrypto's verdict on its own), ``contract`` for a stored
contract (saihm/audit/verifier.py, check 6).
"""

from __future__ import annotations

import os

import cbor2
import pytest

import saihm.audit.sigcheck as sigcheck
from saihm.events import CONTRACT_CONTEXT, RECEIPT_CONTEXT, Contract, HolderKey
from saihm.events.records import Body
from saihm.events.signing import contract_signed_bytes
from saihm.protocol import call as binding_call
from tests.support.optional import require_module

from .conftest import World
from .helpers import find_leaf, leaves, rewrite_log, run_verify

_SIGNATURE = 5  # a receipt's signature (saihm-protocol "Wire formats"; not signed itself)
_SIGNED_OUT = (1, 5)  # receiptId and signature: every other key is signed


def _pinned(world: World) -> list[str]:
    return ["--data", str(world.data), "--trust", str(world.keys_file)]


def _signed_bytes(leaf: bytes) -> bytes:
    m = cbor2.loads(leaf)
    return cbor2.dumps({k: v for k, v in m.items() if k not in _SIGNED_OUT}, canonical=True)


def _with_signature(leaf: bytes, signature: bytes) -> bytes:
    m = cbor2.loads(leaf)
    m[_SIGNATURE] = signature
    return cbor2.dumps(m, canonical=True)


def _replace_leaf(world: World, index: int, leaf: bytes) -> None:
    """Leaf ``index`` becomes ``leaf``; the tree and every checkpoint are rebuilt over it and
    re-signed with the log keys, so only the leaf's own checks can object."""
    all_leaves = leaves(world.lmdb_dir)
    assert cbor2.loads(leaf)[1] == cbor2.loads(all_leaves[index])[1]  # the same receiptId
    all_leaves[index] = leaf
    env = world.env()
    try:
        rewrite_log(env, world.data, all_leaves)
    finally:
        env.close()


def _only_failure(report: dict) -> dict:
    assert len(report["failures"]) == 1, report["failures"]
    return report["failures"][0]


def test_the_untampered_world_verifies_with_both_implementations(world: World, capsys) -> None:
    require_module("pqcrypto", "audit")
    code, report = run_verify(capsys, *_pinned(world), "--second-implementation")
    assert code == 0, report["failures"]


def test_a_receipt_signed_over_other_bytes_fails_the_signature_check(world: World, capsys) -> None:
    """The holder's own valid signature, lifted from another of its receipts."""
    index = find_leaf(world.lmdb_dir, "REMEMBER", world.cells["beta"])
    donor = find_leaf(world.lmdb_dir, "REMEMBER", world.cells["alpha"])
    all_leaves = leaves(world.lmdb_dir)
    lifted = cbor2.loads(all_leaves[donor])[_SIGNATURE]
    _replace_leaf(world, index, _with_signature(all_leaves[index], lifted))
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    assert _only_failure(report) == {
        "check": "signature",
        "what": "receipt ML-DSA-65 signature does not verify",
        "index": index,
    }


def test_a_receipt_signed_by_another_key_fails_the_signature_check(world: World, capsys) -> None:
    """A valid ML-DSA-65 signature over the receipt's own signed bytes, by a key that is not
    the holder's."""
    index = find_leaf(world.lmdb_dir, "REMEMBER", world.cells["delta"])
    leaf = leaves(world.lmdb_dir)[index]
    stranger = HolderKey.from_seed(os.urandom(32))
    forged = stranger.sign(_signed_bytes(leaf), RECEIPT_CONTEXT)
    _replace_leaf(world, index, _with_signature(leaf, forged))
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    assert _only_failure(report) == {
        "check": "signature",
        "what": "receipt ML-DSA-65 signature does not verify",
        "index": index,
    }


def test_the_second_implementation_is_heard_on_its_own(
    world: World, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in the first ML-DSA library (here: one that accepts every signature) cannot hide
    a forged receipt from ``--second-implementation``: pqcrypto's rejection is reported."""
    require_module("pqcrypto", "audit")
    index = find_leaf(world.lmdb_dir, "REMEMBER", world.cells["beta"])
    leaf = leaves(world.lmdb_dir)[index]
    forged = HolderKey.from_seed(os.urandom(32)).sign(_signed_bytes(leaf), RECEIPT_CONTEXT)
    _replace_leaf(world, index, _with_signature(leaf, forged))
    monkeypatch.setattr(sigcheck, "mldsa65_verify", lambda *_: None)  # accepts anything
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 0  # the first implementation alone is fooled ...
    code, report = run_verify(capsys, *_pinned(world), "--second-implementation")
    assert code == 1  # ... the second is not
    assert _only_failure(report) == {
        "check": "signature",
        "what": "receipt signature rejected by the second implementation (pqcrypto)",
        "index": index,
    }


def test_a_contract_signed_by_another_key_fails_the_contract_check(world: World, capsys) -> None:
    """A stored contract whose signature is replaced by another key's valid signature over the
    same signed bytes: its contractId (SHA-256 of those bytes) and SHARE receipt still match,
    and the log is untouched; only the contract's signature check sees it."""
    op = world.operator()
    try:
        grantee = op.admin.create_holder()
        contract_id = binding_call(
            op,
            world.token_a1,
            "saihm_share",
            {
                "granteeIdHashesHex": [grantee.hex()],
                "shardIds": [world.cells["alpha"].hex()],
                "type": "permanent",
                "scope": "read",
                "expiryEpoch": None,
            },
        )["contractId"]
        op.store.checkpoint_now()
    finally:
        op.store.close()
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 0 and report["contracts"] == 1, report["failures"]

    key = bytes.fromhex(contract_id)
    env = world.env()
    try:
        with env.begin(write=True) as txn:
            bodies = env.open_db(b"bodies", txn=txn)
            body = Body.decode(bytes(txn.get(key, db=bodies)))
            contract = Contract.from_cbor(body.object_cbor)
            forged = HolderKey.from_seed(os.urandom(32)).sign(
                contract_signed_bytes(contract), CONTRACT_CONTEXT
            )
            tampered = contract.model_copy(update={"signature": forged})
            assert tampered.contract_id == key
            body = Body(
                object_cbor=tampered.to_cbor(),
                session_tag=body.session_tag,
                record_seq=body.record_seq,
                record_end=body.record_end,
            )
            txn.put(key, body.encode(), db=bodies)
    finally:
        env.close()
    code, report = run_verify(capsys, *_pinned(world))
    assert code == 1
    failure = _only_failure(report)
    assert failure["check"] == "contract"
    assert failure["what"].startswith(f"contract {contract_id}: ")
    assert "signature" in failure["what"]
    assert failure["index"] == find_leaf(world.lmdb_dir, "SHARE", key)
