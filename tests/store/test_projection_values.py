"""Every projection value is canonical CBOR (RFC 8949 §4.2.1), whichever path wrote it."""

from __future__ import annotations

import cbor2

from saihm.projections import apply as PJ

CBOR_VALUED = (
    PJ.CELLS,
    PJ.RECORD_HEADS,
    PJ.CONTRACTS,
    PJ.HOLDERS,
    PJ.PROPOSALS,
    PJ.VOTES,
    PJ.TALLIES,
    PJ.GRANTS,
)


def test_every_projection_value_is_canonical_cbor_after_every_kind_of_event(world, tmp_path):
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="x")["cellId"]
    world.call(alice, "saihm_record", content="said", kind="said")
    contract = world.share_accepted(alice, bob, [cell])
    world.call(alice, "saihm_revoke_share", contractId=contract)
    pid = world.call(alice, "saihm_governance_propose", scope="protocol_upgrade")["proposalId"]
    world.call(bob, "saihm_governance_vote", proposalId=pid, approve=True)
    world.grant_token(alice.holder_id, ["memory"])
    world.call(alice, "saihm_forget", id=cell)
    seen = set()
    with world.store.read_txn() as txn:
        for name in CBOR_VALUED:
            for key, _ in world.store.projections.items(txn, name):
                seen.add(name)
                # MAC-bound records are value || tag; the value inside is the canonical CBOR.
                value = world.store.projections.get(txn, name, bytes(key))
                assert cbor2.dumps(cbor2.loads(value), canonical=True) == value, name
    assert seen == set(CBOR_VALUED)
    assert world.store.rebuild_into(tmp_path / "rebuilt")["identical"]
