"""One test per operator rule of saihm-protocol.txt (custodial profile), in-process, no HTTP.

Each test quotes the sentence it checks. ``world`` (tests/store/conftest.py) is a real operator
over a temporary data directory with a settable clock.
"""

from __future__ import annotations

import pytest
from pqcrypto.sign.ml_dsa_65 import verify as pq_verify

from saihm.errors import SaihmError
from saihm.events import Receipt
from saihm.events.signing import RECEIPT_CONTEXT, receipt_signed_bytes
from saihm.projections import apply as PJ
from saihm.protocol import call as binding_call
from saihm.translog import verify_inclusion
from saihm.translog.checkpoint import verify_checkpoint
from saihm.translog.hashing import leaf_hash


def code_of(call) -> str:
    with pytest.raises(SaihmError) as info:
        call()
    return info.value.code


def leaves(world) -> list[Receipt]:
    return [Receipt.from_cbor(leaf) for leaf in world.store.leaves(0, world.store.size())]


def ops(world) -> list[str]:
    return [r.operation.value for r in leaves(world)]


def public_key_of(world, holder_id: bytes) -> bytes:
    for r in leaves(world):
        if r.operation.value == "KEY" and r.holder_id == holder_id:
            return r.detail
    raise AssertionError("no KEY receipt")


# -- identity and receipts -------------------------------------------------------------------


def test_key_receipt_is_written_when_a_holder_is_created(world) -> None:
    """ "When it creates a holder, the operator MUST write the holder's public key to the audit
    log in a KEY receipt, which anyone can find by holderId." """
    alice = world.holder()
    found, _ = world.store.receipts("holderId", alice.holder_id)
    first = Receipt.from_cbor(found[0][1])
    assert first.operation.value == "KEY"
    assert first.subject_id == alice.holder_id
    assert len(first.detail) == 1952


def test_every_receipt_is_signed_with_the_key_its_holder_id_names(world) -> None:
    """ "Every receipt, extension operations included, is signed with the key of the holderId it
    names" — checked here with pqcrypto, an implementation independent of the signer's."""
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="a fact")
    world.share_accepted(alice, bob, [cell["cellId"]])
    world.call(bob, "saihm_recall")
    world.call(alice, "saihm_forget", id=cell["cellId"])
    receipts = leaves(world)
    assert {r.operation.value for r in receipts} >= {
        "KEY",
        "REMEMBER",
        "SHARE",
        "ACCEPT",
        "RECALL",
        "FORGET",
    }
    for r in receipts:
        pq_verify(
            public_key_of(world, r.holder_id),
            receipt_signed_bytes(r),
            r.signature,
            context=RECEIPT_CONTEXT,
        )


def test_receipts_never_carry_plaintext_query_or_keys(world) -> None:
    """ "A receipt MUST NOT contain plaintext, a DEK, a wrapped DEK, a KEK, the holder seed or a
    private key." and the query "MUST NOT" be written to a receipt."""
    alice = world.holder()
    world.call(alice, "saihm_remember", content="zebra-secret-plaintext")
    world.call(alice, "saihm_recall", query="giraffe-secret-query")
    world.call(alice, "saihm_status")
    with world.store.read_txn() as txn:
        seed = world.store.keyring.seed(txn, alice.holder_id)
    blob = b"".join(world.store.leaves(0, world.store.size()))
    assert b"zebra-secret-plaintext" not in blob
    assert b"giraffe-secret-query" not in blob
    assert seed not in blob
    for version in world.store.kek_dir.live_versions():
        assert world.store.kek_dir.kek(version) not in blob


def test_checkpoint_covers_each_receipt_and_inclusion_verifies(world) -> None:
    """A signed checkpoint commits to every receipt; any party can check inclusion."""
    alice = world.holder()
    result = world.call(alice, "saihm_remember", content="checkpointed")
    note = world.store.checkpoint_now()
    checkpoint = verify_checkpoint(note, world.store.log_keys.verifier_keys())
    index, leaf = world.store.receipt(bytes.fromhex(result["receiptId"]))
    proof = world.store.inclusion_proof(index, checkpoint.size)
    verify_inclusion(leaf_hash(leaf), index, checkpoint.size, proof, checkpoint.root_hash)


# -- saihm_remember ----------------------------------------------------------------------------


def test_remember_seals_signs_stores_and_writes_a_remember_receipt(world) -> None:
    """ "Seal content into a new cell, sign it, store it, and write a REMEMBER receipt." """
    alice = world.holder()
    result = world.call(alice, "saihm_remember", content="the sky is blue")
    assert set(result) >= {"cellId", "cellNonce", "tier", "kekVersion", "epoch", "signaturePrefix"}
    last = leaves(world)[-1]
    assert last.operation.value == "REMEMBER"
    assert last.subject_id.hex() == result["cellId"]
    assert last.receipt_id.hex() == result["receiptId"]
    body = world.store.body(bytes.fromhex(result["cellId"]))
    assert b"the sky is blue" not in body.object_cbor


def test_remember_rejects_empty_or_white_space_content(world) -> None:
    """ "The operator SHOULD reject content that is empty or only white space." """
    alice = world.holder()
    size = world.store.size()
    for content in ("", "   ", "\n\t"):
        assert code_of(lambda c=content: world.call(alice, "saihm_remember", content=c)) == (
            "empty_content"
        )
    assert world.store.size() == size


def test_same_plaintext_written_twice_yields_two_cell_ids(world) -> None:
    """ "the same plaintext written twice yields two distinct cellIds." """
    alice = world.holder()
    a = world.call(alice, "saihm_remember", content="same")
    b = world.call(alice, "saihm_remember", content="same")
    assert a["cellId"] != b["cellId"]


def test_unauthenticated_callers_are_refused_and_nothing_is_stored(world) -> None:
    """The operator authenticates every call; a missing, altered or expired token changes
    nothing."""
    alice = world.holder()
    size = world.store.size()
    altered = alice.token[:-8] + ("A" if alice.token[-8] != "A" else "B") + alice.token[-7:]
    for token in (None, "", "not-a-token", altered):
        code = code_of(
            lambda t=token: binding_call(world.operator, t, "saihm_remember", {"content": "x"})
        )
        assert code == "unauthenticated"
    world.clock.now += 3601
    assert code_of(lambda: world.call(alice, "saihm_remember", content="x")) == "unauthenticated"
    assert world.store.size() == size


def test_a_token_signed_by_another_authority_is_refused(world, tmp_path) -> None:
    """ "What proves that a caller may read is issued elsewhere, so the caller cannot
    manufacture it." (requirements.txt)"""
    from saihm.authority import Authority
    from saihm.events import CapabilityScope

    alice = world.holder()
    rogue = Authority.open(tmp_path / "rogue", create=True)
    forged = rogue.issue(alice.holder_id, alice.session_id, CapabilityScope(), 60).to_token()
    assert code_of(lambda: world.call(forged, "saihm_recall")) == "unauthenticated"


def test_unknown_parameters_are_refused(world) -> None:
    """No API accepts a caller-supplied filter that widens what is seen (DESIGN.md)."""
    alice = world.holder()
    code = code_of(lambda: world.call(alice, "saihm_recall", query="", holderId="00" * 32))
    assert code == "unknown_param"


# -- saihm_recall ------------------------------------------------------------------------------


def test_memory_starts_shared_within_one_session_only(world) -> None:
    """ "Memory and knowledge start out shared within one session only." (requirements.txt)"""
    alice = world.holder()
    world.call(alice, "saihm_remember", content="session one note")
    _, other_token = world.session(alice.holder_id)
    assert world.call(other_token, "saihm_recall") == []
    assert [c["plaintext"] for c in world.call(alice, "saihm_recall")] == ["session one note"]


def test_recall_filters_by_query_keywords(world) -> None:
    """ "apply the query as a filter on the plaintext ... keyword containment is the baseline." """
    alice = world.holder()
    world.call(alice, "saihm_remember", content="Paris is in France")
    world.call(alice, "saihm_remember", content="Rome is in Italy")
    assert [c["plaintext"] for c in world.call(alice, "saihm_recall", query="paris")] == [
        "Paris is in France"
    ]
    assert len(world.call(alice, "saihm_recall", query="")) == 2
    assert len(world.call(alice, "saihm_recall")) == 2


def test_recall_elements_carry_the_owner_holder_id(world) -> None:
    """ "holderIdHex (required: the holderId of the cell's owner ...)" """
    alice = world.holder()
    world.call(alice, "saihm_remember", content="mine")
    (item,) = world.call(alice, "saihm_recall")
    assert item["holderIdHex"] == alice.hex
    assert item["plaintext"] == "mine"
    assert item["kind"] == "memory" and item["namespace"] == "memory"


def test_recall_omits_and_logs_a_cell_that_fails_verification(world, caplog) -> None:
    """ "Verify each cell's cellId and signature, and omit and log any cell that fails." """
    from saihm.projections import Body
    from saihm.store import BODIES

    alice = world.holder()
    cell_id = bytes.fromhex(world.call(alice, "saihm_remember", content="to be tampered")["cellId"])
    world.call(alice, "saihm_remember", content="intact")
    body = world.store.body(cell_id)
    tampered = bytearray(body.object_cbor)
    tampered[-40] ^= 1
    with world.store.storage.write() as txn:
        new = Body(bytes(tampered), body.session_tag).encode()
        txn.put(cell_id, new, db=world.store.env.db[BODIES])
    with caplog.at_level("WARNING", logger="saihm.store"):
        assert [c["plaintext"] for c in world.call(alice, "saihm_recall")] == ["intact"]
    assert cell_id.hex() in caplog.text


def test_recall_writes_a_recall_receipt_with_the_holder_as_subject(world) -> None:
    """RECALL receipts are on by default; subjectId is the holderId."""
    alice = world.holder()
    world.call(alice, "saihm_recall", query="anything")
    last = leaves(world)[-1]
    assert last.operation.value == "RECALL"
    assert last.subject_id == alice.holder_id
    assert last.detail is None


# -- saihm_forget ------------------------------------------------------------------------------


def test_forget_withdraws_logs_forget_lists_erasure_and_destroys_the_dek(world) -> None:
    """ "stop serving the cell ...; write a FORGET receipt for the cellId ...; add the cellId to
    its erasure list" and, for cryptographic erasure, destroy the wrapped DEK."""
    alice = world.holder()
    cell = world.call(alice, "saihm_remember", content="forget me")
    cell_id = bytes.fromhex(cell["cellId"])
    result = world.call(alice, "saihm_forget", id=cell["cellId"])
    assert result["success"] is True and result["cellId"] == cell["cellId"]
    forget = leaves(world)[-1]
    assert forget.operation.value == "FORGET" and forget.subject_id == cell_id
    assert result["destructionAnchor"] == forget.receipt_id.hex()
    assert cell_id in world.store.erasures()[0]
    with world.store.read_txn() as txn:
        assert not world.store.keyring.has_dek(txn, cell_id)
    assert world.call(alice, "saihm_recall") == []


def test_repeated_forget_returns_success_false_and_writes_no_receipt(world) -> None:
    """ "A call that changes nothing, such as ... a repeated saihm_forget ..., writes no
    receipt." and "success false means the cell was not found or was already erased." """
    alice = world.holder()
    cell = world.call(alice, "saihm_remember", content="once")
    world.call(alice, "saihm_forget", id=cell["cellId"])
    size = world.store.size()
    assert world.call(alice, "saihm_forget", id=cell["cellId"]) == {"success": False}
    assert world.call(alice, "saihm_forget", id="ab" * 32) == {"success": False}
    assert world.store.size() == size


def test_forget_of_another_holders_cell_is_not_holder(world) -> None:
    """ "Confirm the caller holds the cell" — a grantee of a shared cell does not hold it."""
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="alice's")
    world.share_accepted(alice, bob, [cell["cellId"]])
    assert code_of(lambda: world.call(bob, "saihm_forget", id=cell["cellId"])) == "not_holder"


def test_forget_outside_the_tokens_scope_is_not_holder(world) -> None:
    """A token may act only on what it may see (DESIGN.md "Capabilities")."""
    alice = world.holder()
    cell = world.call(alice, "saihm_remember", content="session-bound")
    _, other = world.session(alice.holder_id)
    assert code_of(lambda: world.call(other, "saihm_forget", id=cell["cellId"])) == "not_holder"


def test_an_erased_cell_is_never_returned_to_anyone(world) -> None:
    """ "An operator MUST consult the erasure list on every saihm_recall and MUST NOT return an
    erased cell to anyone." """
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="shared then erased")
    world.share_accepted(alice, bob, [cell["cellId"]])
    assert len(world.call(bob, "saihm_recall")) == 1
    world.call(alice, "saihm_forget", id=cell["cellId"])
    assert world.call(bob, "saihm_recall") == []
    assert world.call(world.grant_token(alice.holder_id), "saihm_recall") == []


# -- sharing -----------------------------------------------------------------------------------


def _share(world, owner, grantees, shards, **kw):
    params = {"type": "permanent", "scope": "read"} | kw
    return world.call(owner, "saihm_share", granteeIdHashesHex=grantees, shardIds=shards, **params)


def test_share_rejects_grantees_that_are_not_32_bytes_or_listed_twice(world) -> None:
    """ "granteeIds is a non-empty list of 32-byte holderIds with no duplicates; the operator
    MUST reject any entry of another length." """
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="x")["cellId"]
    size = world.store.size()
    for grantees in ([bob.hex[:-2]], [bob.hex + "00"], [bob.hex, bob.hex], [], ["zz" * 32]):
        assert code_of(lambda g=grantees: _share(world, alice, g, [cell])) == "invalid_grantee"
    assert world.store.size() == size


def test_share_rejects_write_and_readwrite_with_invalid_scope(world) -> None:
    """ "an operator MUST reject "write" and "readwrite" with the error "invalid_scope"." """
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="x")["cellId"]
    for scope in ("write", "readwrite"):
        code = code_of(lambda s=scope: _share(world, alice, [bob.hex], [cell], scope=s))
        assert code == "invalid_scope"


def test_share_rejects_an_unknown_mode(world) -> None:
    """type is the lowercase form of TEMPORARY, PERMANENT or SYNDICATE."""
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="x")["cellId"]
    for kind in ("forever", "PERMANENT", ""):
        assert code_of(lambda k=kind: _share(world, alice, [bob.hex], [cell], type=k)) == (
            "invalid_mode"
        )


def test_share_applies_each_modes_expiry_rule(world) -> None:
    """TEMPORARY: "expiresAt MUST be later than the contract timestamp and no later than the
    contract timestamp plus 86400 seconds. The sentinel 0 is not permitted." PERMANENT:
    "expiresAt MUST be the sentinel 0". SYNDICATE: "0 or a future timestamp"; a null
    expiryEpoch means 0 for PERMANENT and SYNDICATE and the operator's default for TEMPORARY."""
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="x")["cellId"]
    now = int(world.clock())
    bad = [
        ("temporary", "0"),
        ("temporary", str(now)),
        ("temporary", str(now + 86401)),
        ("permanent", str(now + 10)),
        ("syndicate", str(now - 1)),
        ("temporary", "12a"),
    ]
    for kind, expiry in bad:
        code = code_of(
            lambda k=kind, e=expiry: _share(world, alice, [bob.hex], [cell], type=k, expiryEpoch=e)
        )
        assert code == "invalid_expiry", (kind, expiry)
    temporary = _share(world, alice, [bob.hex], [cell], type="temporary", expiryEpoch=None)
    assert now < int(temporary["expiresAt"]) <= now + 86400
    assert _share(world, alice, [bob.hex], [cell], type="syndicate")["expiresAt"] == "0"
    longest = _share(
        world, alice, [bob.hex], [cell], type="temporary", expiryEpoch=str(now + 86400)
    )
    assert longest["type"] == "temporary"


def test_share_covers_only_the_callers_own_cells(world) -> None:
    """ "Confirm the caller holds every listed cell" (not_holder; shard_not_found if absent)."""
    alice, bob = world.holder(), world.holder()
    bobs = world.call(bob, "saihm_remember", content="bob's")["cellId"]
    assert code_of(lambda: _share(world, alice, [bob.hex], [bobs])) == "not_holder"
    assert code_of(lambda: _share(world, alice, [bob.hex], ["cd" * 32])) == "shard_not_found"


def test_a_contract_takes_effect_only_after_the_grantee_accepts(world) -> None:
    """ "A contract therefore takes effect for a grantee only after that grantee has accepted
    it" and "A grantee MUST be able to decline or later withdraw its acceptance." """
    alice, bob, carol = world.holder(), world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="offer")["cellId"]
    contract = _share(world, alice, [bob.hex, carol.hex], [cell])["contractId"]
    assert world.call(bob, "saihm_recall") == []
    world.call(bob, "saihm_accept_contract", contractId=contract)
    _, bobs_other_session = world.session(bob.holder_id)
    for token in (bob, bobs_other_session):
        (item,) = world.call(token, "saihm_recall")
        assert item["holderIdHex"] == alice.hex and item["plaintext"] == "offer"
    assert world.call(carol, "saihm_recall") == []
    world.call(bob, "saihm_decline_contract", contractId=contract)
    assert world.call(bob, "saihm_recall") == []


def test_an_expired_temporary_contract_is_not_active(world) -> None:
    """ "A contract is active for a grantee while ... its expiresAt is 0 or later than the
    current time." """
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="brief")["cellId"]
    expiry = str(int(world.clock()) + 100)
    contract = _share(world, alice, [bob.hex], [cell], type="temporary", expiryEpoch=expiry)
    world.call(bob, "saihm_accept_contract", contractId=contract["contractId"])
    assert len(world.call(bob, "saihm_recall")) == 1
    world.clock.now += 101
    assert world.call(bob, "saihm_recall") == []


def test_only_a_named_grantee_can_accept(world) -> None:
    """Any holder can name any holderId; only the named grantee's acceptance counts."""
    alice, bob, mallory = world.holder(), world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="x")["cellId"]
    contract = _share(world, alice, [bob.hex], [cell])["contractId"]
    assert code_of(lambda: world.call(mallory, "saihm_accept_contract", contractId=contract)) == (
        "not_grantee"
    )
    assert world.call(mallory, "saihm_recall") == []


# -- saihm_revoke_share -------------------------------------------------------------------------


def test_revocation_ends_access_for_every_grantee(world) -> None:
    """ "Revocation takes effect for every grantee of the contract as soon as the operator
    applies it." """
    alice, bob, carol = world.holder(), world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="team note")["cellId"]
    contract = _share(world, alice, [bob.hex, carol.hex], [cell], type="syndicate")["contractId"]
    for grantee in (bob, carol):
        world.call(grantee, "saihm_accept_contract", contractId=contract)
        assert len(world.call(grantee, "saihm_recall")) == 1
    assert world.call(alice, "saihm_revoke_share", contractId=contract)["revoked"] is True
    assert leaves(world)[-1].operation.value == "REVOKE"
    for grantee in (bob, carol):
        assert world.call(grantee, "saihm_recall") == []


def test_repeated_revoke_returns_revoked_true_and_writes_no_receipt(world) -> None:
    """ "Revoking a contract the caller has already revoked returns revoked = true" and writes
    no receipt."""
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="x")["cellId"]
    contract = _share(world, alice, [bob.hex], [cell])["contractId"]
    world.call(alice, "saihm_revoke_share", contractId=contract)
    size = world.store.size()
    assert world.call(alice, "saihm_revoke_share", contractId=contract)["revoked"] is True
    assert world.store.size() == size


def test_revoke_needs_the_contracts_holder(world) -> None:
    """ "Confirm the caller is the contract's holder" (not_holder; contract_not_found)."""
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="x")["cellId"]
    contract = _share(world, alice, [bob.hex], [cell])["contractId"]
    assert code_of(lambda: world.call(bob, "saihm_revoke_share", contractId=contract)) == (
        "not_holder"
    )
    assert code_of(lambda: world.call(alice, "saihm_revoke_share", contractId="ef" * 32)) == (
        "contract_not_found"
    )


def test_revoked_contracts_are_not_listed_in_status(world) -> None:
    """status contracts: "Expired entries MAY be included; revoked contracts MUST NOT be." """
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="x")["cellId"]
    keep = _share(world, alice, [bob.hex], [cell])["contractId"]
    gone = _share(world, alice, [bob.hex], [cell])["contractId"]
    world.call(alice, "saihm_revoke_share", contractId=gone)
    listed = [c["contractId"] for c in world.call(alice, "saihm_status")["contracts"]]
    assert listed == [keep]


# -- saihm_status ------------------------------------------------------------------------------


def test_status_reports_identity_custody_shards_and_receipt_count(world) -> None:
    """agentIdHashHex is REQUIRED; bfsi_R is the number of the holder's receipts in the window;
    the operator "MUST NOT return bfsi or bfsi_M"."""
    alice = world.holder()
    world.call(alice, "saihm_remember", content="one")
    world.call(alice, "saihm_remember", content="two")
    status = world.call(alice, "saihm_status")
    assert status["agentIdHashHex"] == alice.hex
    assert status["custody"] == "custodial"
    assert status["shards"] == {"STANDARD": 2}
    own = len(world.store.receipts("holderId", alice.holder_id, limit=1000)[0])
    assert int(status["bfsi_R"]) == own - 1  # the STATUS receipt is written after counting
    assert "bfsi" not in status and "bfsi_M" not in status
    assert 0.0 <= status["prs"] <= 1.0


# -- governance --------------------------------------------------------------------------------


def test_governance_disabled_answers_a_failure(world_with) -> None:
    """ "an operator that has not enabled it answers with a failure status." """
    w = world_with(governance=False)
    alice = w.holder()
    assert (
        code_of(lambda: w.call(alice, "saihm_governance_propose", scope="protocol_upgrade"))
        == "governance_disabled"
    )


def test_emission_param_proposals_need_a_governable_key_and_a_value(world) -> None:
    """A proposal must name a parameter the operator publishes as governable."""
    alice = world.holder()
    assert code_of(lambda: world.call(alice, "saihm_governance_propose", scope="nope")) == (
        "unknown_scope"
    )
    code = code_of(
        lambda: world.call(
            alice,
            "saihm_governance_propose",
            scope="emission_param",
            paramKey="secret_knob",
            proposedValue="1",
        )
    )
    assert code == "unknown_param"
    ok = world.call(
        alice,
        "saihm_governance_propose",
        scope="emission_param",
        paramKey="kek_rotation_hours",
        proposedValue="12",
    )
    assert ok["proposerHash"] == alice.hex and leaves(world)[-1].operation.value == "PROPOSE"


def test_a_repeated_vote_returns_the_first_vote_and_writes_no_receipt(world) -> None:
    """ "A repeated vote by the same holder, including one sent after the voting window has
    closed, changes nothing, writes no receipt, and returns the success result of the vote
    already recorded, with its own direction and weight." """
    alice, bob = world.holder(), world.holder()
    proposal = world.call(alice, "saihm_governance_propose", scope="protocol_upgrade")
    pid = proposal["proposalId"]
    first = world.call(bob, "saihm_governance_vote", proposalId=pid, approve=True)
    size = world.store.size()
    again = world.call(bob, "saihm_governance_vote", proposalId=pid, approve=False)
    assert again["approve"] is True and again["weight"] == first["weight"]
    world.clock.now += world.config.voting_window + 1
    _, bob_later = world.session(bob.holder_id)
    _, alice_later = world.session(alice.holder_id)
    late = world.call(bob_later, "saihm_governance_vote", proposalId=pid, approve=False)
    assert late["approve"] is True
    assert world.store.size() == size
    assert (
        code_of(
            lambda: world.call(alice_later, "saihm_governance_vote", proposalId=pid, approve=True)
        )
        == "proposal_closed"
    )


def test_tallies_count_only_the_first_vote_per_holder_in_log_order(world) -> None:
    """ "Tallies MUST be reproducible from the VOTE receipts in the audit log, counting, for each
    holder and proposal, only the first VOTE receipt in log order." """
    alice, bob, carol = world.holder(), world.holder(), world.holder()
    pid = world.call(alice, "saihm_governance_propose", scope="protocol_upgrade")["proposalId"]
    world.call(bob, "saihm_governance_vote", proposalId=pid, approve=True)
    world.call(carol, "saihm_governance_vote", proposalId=pid, approve=False)
    world.call(bob, "saihm_governance_vote", proposalId=pid, approve=False)
    (entry,) = world.call(alice, "saihm_status")["governance"]
    assert (entry["tally_for"], entry["tally_against"], entry["tally_abstain"]) == ("1", "1", "0")
    votes = [r for r in leaves(world) if r.operation.value == "VOTE"]
    assert len(votes) == 2


def test_a_holder_created_after_the_snapshot_is_an_ineligible_voter(world) -> None:
    """ "weight acquired after the snapshot does not count" — here eligibility itself."""
    alice = world.holder()
    pid = world.call(alice, "saihm_governance_propose", scope="protocol_upgrade")["proposalId"]
    late = world.holder()
    assert (
        code_of(lambda: world.call(late, "saihm_governance_vote", proposalId=pid, approve=True))
        == "ineligible_voter"
    )
    assert (
        code_of(
            lambda: world.call(late, "saihm_governance_vote", proposalId="12" * 32, approve=True)
        )
        == "proposal_not_found"
    )


# -- capabilities and grants -------------------------------------------------------------------


def test_a_holder_wide_grant_sees_every_session_and_is_logged(world) -> None:
    """ "Any wider sharing is a capability that a person grants, not the default." """
    alice = world.holder()
    world.call(alice, "saihm_remember", content="first session")
    _, second = world.session(alice.holder_id)
    world.call(second, "saihm_remember", content="second session")
    wide = world.grant_token(alice.holder_id)
    assert leaves(world)[-1].operation.value == "GRANT"
    assert sorted(c["plaintext"] for c in world.call(wide, "saihm_recall")) == [
        "first session",
        "second session",
    ]


def test_a_namespace_grant_sees_only_its_namespaces(world) -> None:
    """Grants may be limited to chosen namespaces; the sealed label decides."""
    alice = world.holder()
    world.call(alice, "saihm_remember", content="work item", namespace="work")
    world.call(alice, "saihm_remember", content="home item", namespace="home")
    work_only = world.grant_token(alice.holder_id, ["work"])
    assert [c["plaintext"] for c in world.call(work_only, "saihm_recall")] == ["work item"]


def test_a_revoked_grant_stops_working_on_the_next_read(world) -> None:
    """Revocation is honoured on the next read (UNGRANT in the log)."""
    alice = world.holder()
    world.call(alice, "saihm_remember", content="x")
    token = world.grant_token(alice.holder_id)
    assert len(world.call(token, "saihm_recall")) == 1
    grant_id = leaves(world)[-2].subject_id  # the GRANT precedes the RECALL
    assert world.operator.admin.ungrant(grant_id) is True
    assert leaves(world)[-1].operation.value == "UNGRANT"
    assert code_of(lambda: world.call(token, "saihm_recall")) == "unauthenticated"
    assert world.operator.admin.ungrant(grant_id) is False


# -- the record ---------------------------------------------------------------------------------


def test_record_cells_chain_by_seq_and_prev_within_a_session(world) -> None:
    """ "The record of what the agent said and did accepts new entries" — chained per session."""
    alice = world.holder()
    said = world.call(alice, "saihm_record", content="hello", kind="said")
    did = world.call(alice, "saihm_record", content="looked it up", kind="did")
    end = world.call(alice, "saihm_record", content="", kind="end")
    assert (said["seq"], did["seq"], end["seq"]) == (0, 1, 2)
    assert said["prev"] is None and did["prev"] == said["cellId"] and end["prev"] == did["cellId"]
    assert code_of(lambda: world.call(alice, "saihm_record", content="more", kind="said")) == (
        "record_ended"
    )


def test_one_recall_covers_memory_and_record(world) -> None:
    """ "What the agent learned and the record of what it did live in the same store, so one
    question can cover both." """
    alice = world.holder()
    world.call(alice, "saihm_remember", content="the user likes tea")
    world.call(alice, "saihm_record", content="I offered tea", kind="said")
    kinds = {c["kind"] for c in world.call(alice, "saihm_recall", query="tea")}
    assert kinds == {"memory", "said"}


def test_forget_session_erases_its_cells_but_keeps_every_receipt(world) -> None:
    """ "Deleting a conversation's data leaves that record intact" — the receipts stay."""
    alice = world.holder()
    world.call(alice, "saihm_remember", content="m")
    world.call(alice, "saihm_record", content="s", kind="said")
    size = world.store.size()
    before = world.store.leaves(0, size)
    result = world.call(alice, "saihm_forget_session", sessionId=alice.session_id.hex())
    assert result["erased"] == 2
    assert world.store.leaves(0, size) == before
    assert ops(world)[-2:] == ["FORGET", "FORGET"]
    assert world.call(alice, "saihm_recall") == []


# -- rebuild -----------------------------------------------------------------------------------


def test_rebuild_from_the_log_is_byte_identical(world, tmp_path) -> None:
    """Projections are derived state, rebuilt from the log byte-identical to the live ones."""
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="x")["cellId"]
    contract = _share(world, alice, [bob.hex], [cell])["contractId"]
    world.call(bob, "saihm_accept_contract", contractId=contract)
    world.call(alice, "saihm_forget", id=cell)
    report = world.store.rebuild_into(tmp_path / "rebuilt")
    assert report["identical"], report["difference"]
    assert report["events"] == world.store.size()


def test_rebuild_names_the_first_difference_when_a_projection_was_edited(world, tmp_path) -> None:
    """rebuild "says where they differ if not"."""
    alice = world.holder()
    cell = bytes.fromhex(world.call(alice, "saihm_remember", content="x")["cellId"])
    with world.store.storage.write() as txn:
        txn.put(cell, b"\x00", db=world.store.projections.db[PJ.ERASURES])
    report = world.store.rebuild_into(tmp_path / "rebuilt")
    assert not report["identical"]
    assert "p_erasures" in report["difference"]


# -- the read path and the write path ------------------------------------------------------------


def test_reading_named_cells_of_another_holder_needs_an_active_contract(world) -> None:
    """ "MUST NOT include a cell whose only grant to that grantee is a contract that is not
    active" — also when the cell is asked for by id."""
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="alice only")["cellId"]
    bobs_access = world.store.authenticate(bob.token)
    assert world.store.read(bobs_access, cell_ids=[bytes.fromhex(cell)]) == []
    contract = _share(world, alice, [bob.hex], [cell])["contractId"]
    assert world.store.read(bobs_access, cell_ids=[bytes.fromhex(cell)]) == []
    world.call(bob, "saihm_accept_contract", contractId=contract)
    (opened,) = world.store.read(bobs_access, cell_ids=[bytes.fromhex(cell)])
    assert opened.shared and opened.payload.content == "alice only"
    assert world.store.read(bobs_access, cell_ids=[bytes.fromhex(cell)], include_shared=False) == []


def test_a_failed_write_transaction_stores_nothing_and_reports_storage_unavailable(
    world, monkeypatch
) -> None:
    """ "If the effect cannot be stored ... the operator discards the effect ... and answers
    operator_storage_unavailable"."""
    alice = world.holder()
    size = world.store.size()

    def fail(step: str) -> None:
        if step == "before_commit":
            raise RuntimeError("disk on fire")

    monkeypatch.setattr(world.store.env, "fault_hook", fail)
    code = code_of(lambda: world.call(alice, "saihm_remember", content="lost"))
    assert code == "operator_storage_unavailable"
    monkeypatch.setattr(world.store.env, "fault_hook", lambda step: None)
    assert world.store.size() == size
    assert world.call(alice, "saihm_recall") == []


def test_the_kek_is_rotated_on_its_schedule_and_old_generations_retired(world) -> None:
    """Erasure is cryptographically complete at the retirement of the KEK generation in force;
    the operator retires it every ``kek_rotation_hours`` (default 24)."""
    import os

    alice = world.holder()
    world.call(alice, "saihm_remember", content="survives rotation")
    kek_dir = world.store.kek_dir
    first = kek_dir.current_version
    issued = kek_dir.issued_at(first)
    assert world.store.rotate_kek_if_due(now=issued + 23 * 3600) is None
    second = world.store.rotate_kek_if_due(now=issued + 24 * 3600)
    assert second == kek_dir.current_version > first
    assert first in kek_dir.retired_versions()
    assert not (kek_dir.path / f"kek-{first:08x}").exists()
    assert [c["plaintext"] for c in world.call(alice, "saihm_recall")] == ["survives rotation"]
    os.utime(kek_dir.path / f"kek-{second:08x}", (issued, issued))
    assert world.store.rotate_kek_if_due(now=issued + 3600) is None


def test_when_unsure_whether_a_receipt_was_written_the_store_looks_it_up(world) -> None:
    """ "If the operator cannot tell whether a receipt write succeeded, it MUST look the receipt
    up by its receiptId before answering, and treats a receipt it finds as written." """
    from saihm.storage import StorageError, WriteTxn

    alice = world.holder()
    real_storage = world.store.storage

    class LostAcknowledgement:
        """Commits for real, then reports a failure, as a lost acknowledgement would."""

        def __init__(self, txn: WriteTxn) -> None:
            self.txn = txn

        def __enter__(self) -> WriteTxn:
            return self.txn.__enter__()

        def __exit__(self, *exc: object) -> None:
            self.txn.__exit__(*exc)  # type: ignore[arg-type]
            raise StorageError("commit acknowledgement lost")

    class Storage:
        def __getattr__(self, name: str) -> object:
            return getattr(real_storage, name)

        def write(self) -> object:
            return LostAcknowledgement(real_storage.write())

    world.store.storage = Storage()
    try:
        result = world.call(alice, "saihm_remember", content="written after all")
    finally:
        world.store.storage = real_storage
    index, _ = world.store.receipt(bytes.fromhex(result["receiptId"]))
    assert index == world.store.size() - 1
    assert [c["plaintext"] for c in world.call(alice, "saihm_recall")] == ["written after all"]


def test_concurrent_calls_grouped_into_one_batch_each_get_their_own_leaf(world, tmp_path) -> None:
    """Group commit: changes waiting together are written in one transaction, each guard sees
    the changes before it (a forget repeated in the same batch writes no second receipt), and
    the tree, the projections and every answer agree."""

    alice = world.holder()
    cells = [world.call(alice, "saihm_remember", content=f"c{i}")["cellId"] for i in range(6)]
    size = world.store.size()
    # Hold the commit lock so every call queues, then release: they form one batch.
    with world.store.commits._cv:
        world.store.commits._committing = True
    calls = [("saihm_remember", {"content": f"new {i}"}) for i in range(6)]
    calls += [("saihm_forget", {"id": cells[0]}), ("saihm_forget", {"id": cells[0]})]
    calls += [("saihm_forget", {"id": c}) for c in cells[1:3]]
    results: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        method, params = calls[i]
        results[i] = world.call(alice, method, **params)

    import threading

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for _ in range(2000):  # bounded: every call reaches the queue within 10 s or the test fails
        if len(world.store.commits._queue) == len(calls):
            break
        threading.Event().wait(0.005)
    else:
        raise AssertionError("not every call reached the commit queue")
    with world.store.commits._cv:
        world.store.commits._committing = False
        world.store.commits._cv.notify_all()
    for t in threads:
        t.join()
    forgets = [results[6], results[7]]
    assert sorted(r["success"] for r in forgets) == [False, True]
    assert world.store.size() == size + 6 + 1 + 2
    anchors = [r.get("receiptId") or r.get("destructionAnchor") for r in results]
    indexes = [world.store.receipt(bytes.fromhex(a))[0] for a in anchors if a]
    assert sorted(indexes) == list(range(size, size + 9))  # one leaf each, no gap, no overlap
    with world.store.read_txn() as txn:
        assert world.store.projections.applied(txn) == world.store.size()
        assert world.store.projections.cells.is_erased(txn, bytes.fromhex(cells[0]))
    recalled = sorted(c["plaintext"] for c in world.call(alice, "saihm_recall"))
    assert recalled == sorted([f"c{i}" for i in range(3, 6)] + [f"new {i}" for i in range(6)])
    assert world.store.rebuild_into(tmp_path / "rebuilt")["identical"]


@pytest.mark.parametrize(
    ("method", "params"),
    [("saihm_remember", {"content": "x"}), ("saihm_record", {"content": "x", "kind": "said"})],
)
def test_a_holder_wide_token_without_a_session_cannot_write(world, method, params) -> None:
    """A capability of sessions "all" may carry no sessionId (events/capability.py): it reads
    every session but has none to write into, so a write is refused with no_session and the
    log does not grow."""
    from saihm.events import CapabilityScope

    holder = world.holder()
    world.call(holder, "saihm_remember", content="kept")
    grant_id, _ = world.operator.admin.grant(holder.holder_id, None, int(world.clock()) + 3600)
    scope = CapabilityScope(sessions="all", grant_id=grant_id)
    cap = world.authority.issue(holder.holder_id, None, scope, 3600, now=int(world.clock()))
    token = cap.to_token()
    assert world.store.authenticate(token).session_id is None
    size = world.store.size()
    assert code_of(lambda: world.call(token, method, **params)) == "no_session"
    assert world.store.size() == size
    recalled = world.call(token, "saihm_recall")
    assert [c["plaintext"] for c in recalled] == ["kept"]
