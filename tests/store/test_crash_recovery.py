"""A process killed at each step of a state-changing call leaves the effect whole or absent.

saihm-protocol "Order of effect and receipt": for saihm_forget and saihm_revoke_share, "If it
cannot withdraw access it answers "operator_storage_unavailable" and nothing has changed", and
"A repeated saihm_revoke_share then returns revoked = true, and a repeated saihm_forget returns
success = false (already erased)". For the other tools, "the operator discards the effect (no
cell is stored, no contract or proposal takes effect, no vote is counted)" when the receipt was
not written, and "Once the receipt is written the operator MUST complete the effect, including
after a restart".

A child process (tests/store/_crash_child.py) runs one call on the same data directory and
calls ``os._exit(137)`` at one step: "signed" (receipt signed, ``Store.commit`` not entered),
"before_commit" (every write made inside the open transaction), "after_commit" (transaction
committed) or "checkpoint" (inside the checkpoint write that follows). The parent then reopens
the store and checks the outcome, that the log rebuilds to the live projections, that a
checkpoint can be signed, and that any new receipt verifies and is included under it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from pqcrypto.sign.ml_dsa_65 import verify as pq_verify

from saihm.events import Operation, Receipt
from saihm.events.signing import RECEIPT_CONTEXT, receipt_signed_bytes
from saihm.projections import apply as PJ
from saihm.translog import leaf_hash, verify_checkpoint, verify_inclusion
from tests.support.world import World

CHILD = Path(__file__).with_name("_crash_child.py")
STEPS = ("signed", "before_commit", "after_commit", "checkpoint")
COMMITTED = {"signed": False, "before_commit": False, "after_commit": True, "checkpoint": True}


@dataclass
class Scene:
    world: World
    a: object  # the acting holder
    b: object  # the other holder (grantee / voter)
    subject: bytes | None  # cell, contract or proposal the call acts on (None for remember)
    token: str
    method: str
    params: dict
    contract: str | None = None


def crash(world: World, token: str, method: str, params: dict, step: str) -> None:
    """Run ``method`` in a child on the same data directory, killed at ``step``."""
    job = {
        "data": str(world.config.data_dir),
        "now": world.clock.now,
        "token": token,
        "method": method,
        "params": params,
        "step": step,
    }
    done = subprocess.run(
        [sys.executable, str(CHILD), json.dumps(job)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 137, f"child did not die at {step}: {done.returncode} {done.stderr}"
    world.reopen()


def new_leaves(world: World, since: int) -> list[Receipt]:
    return [Receipt.from_cbor(leaf) for leaf in world.store.leaves(since, world.store.size())]


def recall_ids(world: World, token: object) -> set[str]:
    return {item["cellId"] for item in world.call(token, "saihm_recall")}


def check_log(world: World, since: int) -> None:
    """Rebuild equals live; a checkpoint signs; every receipt since ``since`` verifies in it."""
    store = world.store
    target = world.config.data_dir.parent / f"rebuild-{secrets.token_hex(4)}"
    report = store.rebuild_into(target)
    assert report["identical"], report["difference"]
    note = store.checkpoint_now()
    checkpoint = verify_checkpoint(note, store.log_keys.verifier_keys(), store.config.origin)
    size = store.size()
    assert checkpoint.size == size
    for index, leaf in enumerate(store.leaves(since, size), start=since):
        proof = store.inclusion_proof(index, size)
        verify_inclusion(leaf_hash(leaf), index, size, proof, checkpoint.root_hash)
        receipt = Receipt.from_cbor(leaf)
        (_, key_leaf), *_ = store.receipts("subjectId", receipt.holder_id, limit=1)[0]
        public_key = Receipt.from_cbor(key_leaf).detail
        assert hashlib.sha256(public_key).digest() == receipt.holder_id
        pq_verify(
            public_key, receipt_signed_bytes(receipt), receipt.signature, context=RECEIPT_CONTEXT
        )


# -- scenes: state before the crashed call ------------------------------------------------


def scene_remember(world: World) -> Scene:
    a, b = world.holder(), world.holder()
    params = {"content": "the crash-test memory"}
    return Scene(world, a, b, None, a.token, "saihm_remember", params)


def scene_forget(world: World) -> Scene:
    a, b = world.holder(), world.holder()
    cell = bytes.fromhex(world.call(a, "saihm_remember", content="to be erased")["cellId"])
    return Scene(world, a, b, cell, a.token, "saihm_forget", {"id": cell.hex()})


def scene_supersede(world: World) -> Scene:
    a, b = world.holder(), world.holder()
    cell = bytes.fromhex(world.call(a, "saihm_remember", content="Priya is vegetarian")["cellId"])
    params = {"content": "Priya is pescatarian now", "supersedes": cell.hex()}
    return Scene(world, a, b, cell, a.token, "saihm_remember", params)


def _shared(world: World) -> tuple[object, object, bytes]:
    a, b = world.holder(), world.holder()
    cell = bytes.fromhex(world.call(a, "saihm_remember", content="shared memory")["cellId"])
    return a, b, cell


def share_params(b: object, cell: bytes) -> dict:
    return {
        "granteeIdHashesHex": [b.hex],
        "shardIds": [cell.hex()],
        "type": "permanent",
        "scope": "read",
        "expiryEpoch": None,
    }


def scene_share(world: World) -> Scene:
    a, b, cell = _shared(world)
    return Scene(world, a, b, cell, a.token, "saihm_share", share_params(b, cell))


def scene_revoke(world: World) -> Scene:
    a, b, cell = _shared(world)
    contract = world.call(a, "saihm_share", **share_params(b, cell))["contractId"]
    world.call(b, "saihm_accept_contract", contractId=contract)
    assert cell.hex() in recall_ids(world, b)
    params = {"contractId": contract}
    return Scene(world, a, b, cell, a.token, "saihm_revoke_share", params, contract)


def scene_vote(world: World) -> Scene:
    a, b = world.holder(), world.holder()
    proposal = world.call(a, "saihm_governance_propose", scope="protocol_upgrade")["proposalId"]
    params = {"proposalId": proposal, "approve": True}
    return Scene(world, a, b, bytes.fromhex(proposal), b.token, "saihm_governance_vote", params)


# -- outcomes -----------------------------------------------------------------------------


def outcome_remember(s: Scene, rx: list[Receipt], committed: bool) -> None:
    w = s.world
    with w.store.read_txn() as txn:
        cells = [bytes(k) for k, _ in w.store.projections.items(txn, PJ.CELLS)]
    if not committed:
        assert rx == [] and cells == [] and recall_ids(w, s.a) == set()
        return
    assert [r.operation for r in rx] == [Operation.REMEMBER]
    assert cells == [rx[0].subject_id]
    [item] = w.call(s.a, "saihm_recall", query="crash-test")
    assert (item["cellId"], item["plaintext"]) == (rx[0].subject_id.hex(), "the crash-test memory")


def outcome_forget(s: Scene, rx: list[Receipt], committed: bool) -> None:
    w, cell = s.world, s.subject
    with w.store.read_txn() as txn:
        has_dek = w.store.keyring.has_dek(txn, cell)
    erased, _ = w.store.erasures()
    if not committed:
        # "nothing has changed": still served, not listed, key intact; a retry erases it.
        assert rx == [] and has_dek and cell not in erased
        assert cell.hex() in recall_ids(w, s.a)
        assert w.call(s.a, "saihm_forget", id=cell.hex())["success"] is True
        return
    assert [(r.operation, r.subject_id) for r in rx] == [(Operation.FORGET, cell)]
    assert not has_dek and cell in erased
    assert cell.hex() not in recall_ids(w, s.a)
    size = w.store.size()
    assert w.call(s.a, "saihm_forget", id=cell.hex()) == {"success": False}
    assert new_leaves(w, size) == []  # no second FORGET receipt


def outcome_supersede(s: Scene, rx: list[Receipt], committed: bool) -> None:
    """DESIGN.md "Pinned additions": the old cell forgotten and the new one remembered in one
    change: both or neither."""
    w, old = s.world, s.subject
    with w.store.read_txn() as txn:
        has_dek = w.store.keyring.has_dek(txn, old)
    texts = [i["plaintext"] for i in w.call(s.a, "saihm_recall")]
    if not committed:
        assert rx == [] and has_dek and texts == ["Priya is vegetarian"]
        return
    assert [(r.operation, r.subject_id == old) for r in rx] == [
        (Operation.REMEMBER, False),
        (Operation.FORGET, True),
    ]
    assert not has_dek and texts == ["Priya is pescatarian now"]
    assert old in w.store.erasures()[0]


def outcome_share(s: Scene, rx: list[Receipt], committed: bool) -> None:
    w = s.world
    incoming = w.call(s.b, "saihm_status")["incomingContracts"]
    if not committed:
        assert rx == [] and incoming == [] and w.call(s.a, "saihm_status")["contracts"] == []
        return
    assert [r.operation for r in rx] == [Operation.SHARE]
    assert [c["contractId"] for c in incoming] == [rx[0].subject_id.hex()]
    w.call(s.b, "saihm_accept_contract", contractId=rx[0].subject_id.hex())
    assert s.subject.hex() in recall_ids(w, s.b)


def outcome_revoke(s: Scene, rx: list[Receipt], committed: bool) -> None:
    w, contract = s.world, s.contract
    sees = s.subject.hex() in recall_ids(w, s.b)
    size = w.store.size()
    again = w.call(s.a, "saihm_revoke_share", contractId=contract)
    assert again["revoked"] is True
    if not committed:
        assert rx == [] and sees, "access was withdrawn without a REVOKE receipt"
        assert "receiptId" in again  # the retry is the first revocation
        return
    assert [(r.operation, r.subject_id.hex()) for r in rx] == [(Operation.REVOKE, contract)]
    assert not sees
    assert "receiptId" not in again and w.store.size() == size  # no new receipt


def outcome_vote(s: Scene, rx: list[Receipt], committed: bool) -> None:
    w, proposal = s.world, s.subject.hex()
    [prop] = w.call(s.a, "saihm_status")["governance"]
    assert prop["propId"] == proposal
    again = w.call(s.b, "saihm_governance_vote", proposalId=proposal, approve=False)
    if not committed:
        assert rx == [] and prop["tally_for"] == "0"
        assert "receiptId" in again and again["approve"] is False  # counted only now
        return
    assert [r.operation for r in rx] == [Operation.VOTE]
    assert prop["tally_for"] == "1" and prop["tally_against"] == "0"
    assert "receiptId" not in again and again["approve"] is True  # the first vote stands


SCENES = {
    "remember": (scene_remember, outcome_remember),
    "forget": (scene_forget, outcome_forget),
    "supersede": (scene_supersede, outcome_supersede),
    "share": (scene_share, outcome_share),
    "revoke_share": (scene_revoke, outcome_revoke),
    "vote": (scene_vote, outcome_vote),
}


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("operation", list(SCENES))
def test_crash_leaves_effect_whole_or_absent(world: World, operation: str, step: str) -> None:
    """A kill before commit: no receipt, no effect; after commit: receipt and full effect."""
    make_scene, check_outcome = SCENES[operation]
    scene = make_scene(world)
    world.store.checkpoint_now()
    size = world.store.size()
    crash(world, scene.token, scene.method, scene.params, step)
    receipts = new_leaves(world, size)
    check_log(world, 0)
    check_outcome(scene, receipts, COMMITTED[step])
    check_log(world, size)


def test_child_without_crash_completes(world: World) -> None:
    """Control: the child script, with a step that never fires, performs the call normally."""
    a = world.holder()
    job = {
        "data": str(world.config.data_dir),
        "now": world.clock.now,
        "token": a.token,
        "method": "saihm_remember",
        "params": {"content": "plain"},
        "step": "never",
    }
    done = subprocess.run(
        [sys.executable, str(CHILD), json.dumps(job)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    world.reopen()
    assert recall_ids(world, a) == {json.loads(done.stdout)["cellId"]}
