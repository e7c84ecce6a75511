"""Every method's JSON result keeps its exact member order and member types (saihm-protocol
each tool's "Result"; docs/formats.md): the binding renders typed results, and this pins the
bytes a client reads, repeats and extension members included."""

from __future__ import annotations

import json
import re
import secrets

import pytest

from saihm.compose import initialise, open_operator
from saihm.config import Config
from saihm.events import CapabilityScope
from saihm.protocol import call

HEX64 = re.compile(r"[0-9a-f]{64}")
DEC = re.compile(r"0|[1-9][0-9]*")


@pytest.fixture
def world(tmp_path):
    config = Config.for_data(tmp_path / "data", governance=True)
    authority = initialise(config)
    operator = open_operator(config, checkpointer=False)

    def token(holder_id: bytes) -> str:
        cap = authority.issue(holder_id, secrets.token_bytes(32), CapabilityScope(), 3600)
        return cap.to_token()

    yield operator, token
    operator.store.close()


def _hex(value: object) -> None:
    assert isinstance(value, str) and HEX64.fullmatch(value), value


def _dec(value: object) -> None:
    assert isinstance(value, str) and DEC.fullmatch(value), value


def test_every_method_keeps_its_members_in_order(world) -> None:
    operator, token = world
    alice, bob = operator.admin.create_holder(), operator.admin.create_holder()
    a, b = token(alice), token(bob)

    cell = call(operator, a, "saihm_remember", {"content": "tea", "namespace": "notes"})
    assert list(cell) == [
        "cellId",
        "cellNonce",
        "tier",
        "kekVersion",
        "epoch",
        "signaturePrefix",
        "receiptId",
    ]
    _hex(cell["cellId"])
    _hex(cell["receiptId"])
    _dec(cell["epoch"])
    assert re.fullmatch(r"[0-9a-f]{32}", cell["cellNonce"])
    assert isinstance(cell["kekVersion"], int) and len(cell["signaturePrefix"]) == 32

    said = call(operator, a, "saihm_record", {"content": "hello", "kind": "said"})
    assert list(said)[-3:] == ["seq", "prev", "kind"]
    assert said["seq"] == 0 and said["prev"] is None and said["kind"] == "said"
    did = call(operator, a, "saihm_record", {"content": "waved", "kind": "did"})
    assert did["seq"] == 1 and did["prev"] == said["cellId"]

    (first, *_) = items = call(operator, a, "saihm_recall", {})
    assert len(items) == 3
    assert list(first) == [
        "cellId",
        "plaintext",
        "holderIdHex",
        "cellNonce",
        "kekVersion",
        "holderSignaturePrefix",
        "timestamp",
        "tier",
        "kind",
        "namespace",
        "sessionId",
    ]
    (hit,) = call(operator, a, "saihm_recall", {"query": "tea"})
    assert list(hit)[-1] == "score" and isinstance(hit["score"], float)
    assert json.dumps(items, separators=(",", ":")).startswith('[{"cellId":"')

    shared = call(
        operator,
        a,
        "saihm_share",
        {
            "granteeIdHashesHex": [bob.hex()],
            "shardIds": [cell["cellId"]],
            "type": "permanent",
            "scope": "read",
        },
    )
    assert list(shared) == ["contractId", "type", "granteeCount", "epoch", "expiresAt", "receiptId"]
    assert shared["type"] == "permanent" and shared["granteeCount"] == 1
    contract = shared["contractId"]

    accepted = call(operator, b, "saihm_accept_contract", {"contractId": contract})
    assert list(accepted) == ["contractId", "accepted", "receiptId"]
    again = call(operator, b, "saihm_accept_contract", {"contractId": contract})
    assert again == {"contractId": contract, "accepted": True}  # a repeat logs nothing

    status = call(operator, b, "saihm_status", {})
    assert list(status)[:9] == [
        "agentIdHashHex",
        "custody",
        "bfsi_window_start_ts",
        "bfsi_R",
        "shards",
        "contracts",
        "incomingContracts",
        "governance",
        "sessionId",
    ]
    (incoming,) = status["incomingContracts"]
    assert list(incoming) == ["contractId", "holderIdHex", "mode", "accepted", "expiresAt"]
    assert incoming["accepted"] is True and incoming["holderIdHex"] == alice.hex()
    (mine,) = call(operator, a, "saihm_status", {})["contracts"]
    assert list(mine) == ["contractId", "mode", "granteeIds", "expiresAt"]
    assert mine["granteeIds"] == [bob.hex()] and mine["mode"] == "PERMANENT"

    declined = call(operator, b, "saihm_decline_contract", {"contractId": contract})
    assert list(declined) == ["contractId", "accepted", "receiptId"]

    revoked = call(operator, a, "saihm_revoke_share", {"contractId": contract})
    assert list(revoked) == ["revoked", "epoch", "receiptId"]
    assert list(call(operator, a, "saihm_revoke_share", {"contractId": contract})) == [
        "revoked",
        "epoch",
    ]

    proposed = call(operator, a, "saihm_governance_propose", {"scope": "protocol_upgrade"})
    assert list(proposed) == [
        "proposalId",
        "scope",
        "paramKey",
        "proposedValue",
        "snapshotEpoch",
        "proposerHash",
        "receiptId",
    ]
    assert proposed["paramKey"] is None and proposed["proposerHash"] == alice.hex()
    pid = proposed["proposalId"]
    (listed,) = call(operator, a, "saihm_status", {})["governance"]
    assert list(listed) == [
        "propId",
        "scope",
        "paramKey",
        "proposedValue",
        "opens_ts",
        "closes_ts",
        "tally_for",
        "tally_against",
        "tally_abstain",
    ]
    assert listed["propId"] == pid and listed["tally_for"] == "0"

    voted = call(operator, a, "saihm_governance_vote", {"proposalId": pid, "approve": True})
    assert list(voted) == [
        "proposalId",
        "voterHash",
        "approve",
        "weight",
        "castAtEpoch",
        "receiptId",
    ]
    repeat = call(operator, a, "saihm_governance_vote", {"proposalId": pid, "approve": False})
    assert repeat == {k: v for k, v in voted.items() if k != "receiptId"}  # the first vote

    forgot = call(operator, a, "saihm_forget", {"id": cell["cellId"]})
    assert list(forgot) == ["success", "cellId", "destructionAnchor", "epoch"]
    assert call(operator, a, "saihm_forget", {"id": cell["cellId"]}) == {"success": False}
    assert call(operator, a, "saihm_forget", {"id": "0" * 64}) == {"success": False}

    session = call(operator, a, "saihm_status", {})["sessionId"]
    gone = call(operator, a, "saihm_forget_session", {"sessionId": session})
    assert list(gone) == ["sessionId", "erased", "cellIds", "receiptIds"]
    assert gone["erased"] == 2 == len(gone["cellIds"]) == len(gone["receiptIds"])
