"""The MCP report marks the host's record apart from memory, and shows incoming contracts
(issue 15: "Assistant said: ..." must not read as a stored fact; incomingContracts in status
is shown). Both are operator extension fields, checked like every operator string."""

from __future__ import annotations

import pytest

from saihm.mcp.checks import has_forbidden_char
from tests.mcp.fake_operator import (
    OWN_ID,
    FakeOperator,
    config,
    json_reply,
    run_tools,
    serve_operator,
    text_of,
)

pytestmark = pytest.mark.anyio


def _cell(n: str, **extra: object) -> dict:
    return {"cellId": n * 64, "plaintext": f"text {n}", "holderIdHex": OWN_ID, **extra}


async def test_record_entries_are_marked_apart_from_memory() -> None:
    recall = [
        _cell("a", kind="memory", namespace="prefs"),
        _cell("b", kind="said", namespace="record", plaintext="Assistant said: done"),
        _cell("c", kind="did", namespace="record"),
        _cell("d", kind="end", namespace="record"),
        _cell("e"),  # an operator without the extension
        _cell("f", kind="said\u202e", namespace="x\x1b[0m"),  # hostile: omitted, not a record
    ]
    fake = FakeOperator(
        routes={
            "saihm_status": json_reply({"agentIdHashHex": OWN_ID}),
            "saihm_recall": json_reply(recall),
        }
    )
    async with serve_operator(fake) as url:
        _, recalled = await run_tools(config(url), ("saihm_status", {}), ("saihm_recall", {}))
    lines = text_of(recalled).split("\n")
    heads = [line for line in lines if line.startswith("[")]
    assert heads == [
        f"[{'a' * 64}] namespace prefs",
        f"[{'b' * 64}] RECORD said: the host's record of what was said, not a stored fact; "
        "namespace record",
        f"[{'c' * 64}] RECORD did: the host's record of an action taken, not a stored fact; "
        "namespace record",
        f"[{'d' * 64}] RECORD end: the host closed this session's record; namespace record",
        f"[{'e' * 64}] text e",
        f"[{'f' * 64}] text f",
    ]
    kinds = [c["kind"] for c in recalled.structured_content["cells"]]
    assert kinds == ["memory", "said", "did", "end", None, None]
    assert not has_forbidden_char(text_of(recalled).replace("\n", ""))


async def test_status_shows_incoming_contracts_and_how_to_accept() -> None:
    pending, accepted = "c" * 64, "d" * 64
    status = {
        "agentIdHashHex": OWN_ID,
        "incomingContracts": [
            {
                "contractId": pending,
                "holderIdHex": "ef" * 32,
                "mode": "TEMPORARY",
                "accepted": False,
                "expiresAt": "1747612800",
            },
            {
                "contractId": accepted,
                "holderIdHex": "ef" * 32,
                "mode": "PERMANENT",
                "accepted": "1",
                "expiresAt": "0",
            },
            {"contractId": "bad id\n", "accepted": "maybe"},
            "not an object",
        ],
    }
    fake = FakeOperator(routes={"saihm_status": json_reply(status)})
    async with serve_operator(fake) as url:
        (result,) = await run_tools(config(url), ("saihm_status", {}))
    text = text_of(result)
    assert "  incoming contracts: 4" in text
    assert (
        f"INCOMING CONTRACT [{pending}] from holder {'ef' * 32}, mode TEMPORARY, expires "
        "2025-05-19T00:00:00Z, not accepted, a person accepts it with "
        f"`saihm contract accept {pending}`"
    ) in text
    assert f"INCOMING CONTRACT [{accepted}]" in text and "accepted (its cells appear" in text
    assert "INCOMING CONTRACT (no valid contractId)" in text and "bad id" not in text
    got = result.structured_content["incomingContracts"]
    assert [c["accepted"] for c in got] == [False, True, None]
    assert result.structured_content["incomingContractCount"] == 4


async def test_status_without_the_extension_reports_no_incoming_contracts_line() -> None:
    fake = FakeOperator(routes={"saihm_status": json_reply({"agentIdHashHex": OWN_ID})})
    async with serve_operator(fake) as url:
        (result,) = await run_tools(config(url), ("saihm_status", {}))
    assert "incoming" not in text_of(result)
    assert result.structured_content["incomingContracts"] is None
