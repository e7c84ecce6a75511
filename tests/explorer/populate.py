"""A small but varied log for the explorer: holders, memories, an erasure, a proposal, votes."""

from __future__ import annotations

from pathlib import Path

from tests.support.serve import holder_create, post


def populate(url: str, data: Path) -> dict:
    """Write through the real binding; returns the ids the tests look for."""
    alice, bob, carol = (holder_create(data) for _ in range(3))
    cells = []
    for i, holder in enumerate((alice, bob, alice, carol, bob)):
        status, result = post(url, holder["token"], "saihm_remember", {"content": f"note {i}"})
        assert status == 200, result
        cells.append(result)
    status, forgotten = post(url, alice["token"], "saihm_forget", {"id": cells[0]["cellId"]})
    assert status == 200, forgotten
    status, proposal = post(
        url, bob["token"], "saihm_governance_propose", {"scope": "protocol_upgrade"}
    )
    assert status == 200, proposal
    votes = (
        (alice, True),
        (bob, True),
        (carol, False),
        (alice, False),
    )  # alice's repeat is not counted
    for holder, approve in votes:
        status, vote = post(
            url,
            holder["token"],
            "saihm_governance_vote",
            {"proposalId": proposal["proposalId"], "approve": approve},
        )
        assert status == 200, vote
    return {
        "cells": cells,
        "erased": cells[0]["cellId"],
        "proposal": proposal,
        "holders": [alice, bob, carol],
    }
