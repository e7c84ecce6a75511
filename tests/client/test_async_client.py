"""AsyncClient against the real application (pytest-aiohttp): every method, typed results,
extension params and fields, and the protocol error codes carried by one exception type."""

from __future__ import annotations

import pytest

from saihm.client import (
    AsyncClient,
    ClientError,
    ContractAnswer,
    Forgotten,
    RecalledCell,
    Recorded,
    Remembered,
    Shared,
    Status,
)


async def test_remember_returns_a_typed_result_naming_the_cell(endpoint, new_holder) -> None:
    _, auth = new_holder()
    async with AsyncClient(endpoint, auth) as client:
        stored = await client.remember("the tea is green")
    assert isinstance(stored, Remembered)
    assert len(stored.cell_id) == 64 and stored.receipt_id is not None
    assert stored.model_dump(by_alias=True)["cellId"] == stored.cell_id


async def test_status_learns_the_caller_holder_id(endpoint, new_holder) -> None:
    holder, auth = new_holder()
    client = AsyncClient(endpoint, auth)
    assert client.holder_id is None
    status = await client.status()
    assert isinstance(status, Status)
    assert status.agent_id_hash_hex == holder == client.holder_id
    assert status.custody == "custodial"
    assert status.incoming_contracts == [] and status.contracts == []


async def test_recall_carries_kind_and_namespace_for_memory_and_record(
    endpoint, new_holder
) -> None:
    """DESIGN.md: one recall covers memory and record alike, told apart by ``kind``."""
    _, auth = new_holder()
    async with AsyncClient(endpoint, auth) as client:
        await client.remember("green tea is preferred", namespace="prefs")
        said = await client.record("said", "Assistant said: I will order green tea")
        did = await client.record("did", "ordered tea")
        items = await client.recall("tea")
    assert isinstance(said, Recorded) and said.kind == "said" and said.seq == 0
    assert did.seq == 1 and did.prev is not None
    by_kind = {item.kind: item for item in items}
    assert set(by_kind) == {"memory", "said", "did"}
    assert by_kind["memory"].namespace == "prefs" and not by_kind["memory"].is_record
    assert by_kind["said"].namespace == "record" and by_kind["said"].is_record
    assert all(isinstance(i, RecalledCell) and not i.shared_by_other_holder for i in items)


async def test_record_end_closes_the_session_record(endpoint, new_holder) -> None:
    _, auth = new_holder()
    async with AsyncClient(endpoint, auth) as client:
        await client.record("said", "hello")
        end = await client.record("end", "")
        assert end.kind == "end"
        with pytest.raises(ClientError) as caught:
            await client.record("said", "after the end")
    assert caught.value.code == "record_ended" and caught.value.http_status == 409


async def test_record_kind_and_blank_content_are_refused_before_sending(
    endpoint, new_holder
) -> None:
    _, auth = new_holder()
    client = AsyncClient(endpoint, auth)
    for kind, content in (("memory", "x"), ("said", "  \n")):
        with pytest.raises(ClientError) as caught:
            await client.record(kind, content)  # type: ignore[arg-type]
        assert caught.value.kind == "refused" and caught.value.outcome == "not_sent"
    assert await client.recall() == []


async def test_forget_and_forget_again(endpoint, new_holder) -> None:
    _, auth = new_holder()
    async with AsyncClient(endpoint, auth) as client:
        stored = await client.remember("to be erased")
        first = await client.forget(stored.cell_id)
        second = await client.forget(stored.cell_id)
        remaining = await client.recall()
    assert isinstance(first, Forgotten) and first.success and first.cell_id == stored.cell_id
    assert first.destruction_anchor is not None
    assert second.success is False
    assert remaining == []


async def test_sharing_through_accept_decline_and_revoke(endpoint, new_holder) -> None:
    """saihm-protocol "Sharing contracts": effect only after acceptance; decline withdraws."""
    alice_id, alice_auth = new_holder()
    bob_id, bob_auth = new_holder()
    async with AsyncClient(endpoint, alice_auth) as alice, AsyncClient(endpoint, bob_auth) as bob:
        cell = await alice.remember("alice's shared note")
        shared = await alice.share([bob_id], [cell.cell_id], "permanent")
        assert isinstance(shared, Shared) and shared.grantee_count == 1
        assert await bob.recall() == []
        (incoming,) = (await bob.status()).incoming_contracts or []
        assert (incoming.contract_id, incoming.accepted) == (shared.contract_id, False)
        assert incoming.holder_id_hex == alice_id

        accepted = await bob.accept_contract(shared.contract_id)
        assert isinstance(accepted, ContractAnswer) and accepted.accepted is True
        (seen,) = await bob.recall()
        assert seen.plaintext == "alice's shared note" and seen.shared_by_other_holder

        declined = await bob.decline_contract(shared.contract_id)
        assert declined.accepted is False
        assert await bob.recall() == []

        await bob.accept_contract(shared.contract_id)
        revoked = await alice.revoke_share(shared.contract_id)
        assert revoked.revoked is True
        assert await bob.recall() == []


async def test_governance_propose_and_vote(endpoint, new_holder) -> None:
    _, auth = new_holder()
    async with AsyncClient(endpoint, auth) as client:
        proposal = await client.governance_propose("protocol_upgrade")
        vote = await client.governance_vote(proposal.proposal_id, True)
        again = await client.governance_vote(proposal.proposal_id, False)
        with pytest.raises(ClientError) as refused:
            await client.governance_propose("emission_param", "kek_rotation_hours")
    assert vote.proposal_id == proposal.proposal_id and vote.approve is True
    assert vote.weight == 1 and proposal.proposer_hash is not None
    assert again.approve is True  # the first vote stands
    assert refused.value.kind == "refused"


async def test_forget_session_erases_memory_and_record_of_the_session(endpoint, new_holder) -> None:
    _, auth = new_holder()
    async with AsyncClient(endpoint, auth) as client:
        await client.remember("session fact")
        await client.record("said", "session words")
        session = (await client.status()).session_id
        assert session is not None
        gone = await client.forget_session(session)
        assert gone.erased == 2 and len(gone.receipt_ids) == 2
        assert await client.recall() == []


async def test_operator_error_codes_arrive_in_one_exception_type(endpoint, new_holder) -> None:
    alice_id, alice_auth = new_holder()
    _, bob_auth = new_holder()
    cell = await AsyncClient(endpoint, alice_auth).remember("alice only")
    bob = AsyncClient(endpoint, bob_auth)
    cases = [
        (bob.forget(cell.cell_id), "not_holder", 403),
        (bob.accept_contract("ab" * 32), "contract_not_found", 404),
        (bob.share([alice_id], ["cd" * 32], "temporary"), "shard_not_found", 404),
    ]
    for call, code, status in cases:
        with pytest.raises(ClientError) as caught:
            await call
        assert (caught.value.code, caught.value.http_status) == (code, status)
        assert caught.value.outcome == "failed"
        assert f'operator reported "{code}"' in str(caught.value)  # the log line names it


async def test_unauthenticated_never_echoes_the_credential(endpoint) -> None:
    secret = "Bearer not-a-real-token-s3cr3t"
    with pytest.raises(ClientError) as caught:
        await AsyncClient(endpoint, secret).remember("x")
    err = caught.value
    assert (err.code, err.http_status, err.kind) == ("unauthenticated", 401, "status")
    assert "s3cr3t" not in str(err) and "s3cr3t" not in repr(err)


async def test_a_token_without_its_bearer_prefix_is_named_as_the_fix(endpoint, new_holder) -> None:
    _, auth = new_holder()
    bare = auth.removeprefix("Bearer ")
    with pytest.raises(ClientError) as caught:
        await AsyncClient(endpoint, bare).status()
    err = caught.value
    assert (err.code, err.http_status) == ("unauthenticated", 401)
    assert err.advice is not None and 'has no "Bearer " prefix' in err.advice
    assert bare not in (err.advice + str(err) + repr(err))
    # With the prefix but a wrong token, the general advice (expiry, revocation) stands.
    with pytest.raises(ClientError) as caught:
        await AsyncClient(endpoint, "Bearer " + bare[:-8] + "AAAAAAAA").status()
    assert caught.value.advice is not None and "Most likely it expired" in caught.value.advice


async def test_an_endpoint_with_a_path_is_told_to_use_the_root(endpoint, new_holder) -> None:
    _, auth = new_holder()
    with pytest.raises(ClientError) as caught:
        await AsyncClient(endpoint + "mcp", auth).status()
    err = caught.value
    assert err.http_status == 404
    assert err.advice is not None and "the endpoint URL has a path (/mcp)" in err.advice
    assert (await AsyncClient(endpoint, auth).status()).agent_id_hash_hex
