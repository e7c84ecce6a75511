"""The operator extension params of saihm_recall over HTTP (docs/retrieval.md "Extension
params"): limit, maxBytes, cursor, namespaces, kinds; the Saihm-Recall-Cut and
Saihm-Recall-Next headers; the score, namespace and kind fields. Without them the protocol's
behaviour holds: "Absent or empty means all cells" (saihm-protocol "saihm_recall")."""

from __future__ import annotations

import json

import pytest

from saihm.http.toolcall import CUT_HEADER, NEXT_HEADER


async def post(client, holder, params: dict) -> tuple[int, object, dict]:
    body = {"method": "saihm_recall", "params": params}
    async with client.post("/", json=body, headers=holder.auth) as resp:
        raw = await resp.read()
        return resp.status, json.loads(raw), {**resp.headers, "_bytes": len(raw)}


async def remember(client, holder, call, n: int, text: str = "note {i} about rivers") -> list:
    ids = []
    for i in range(n):
        status, body = await call(client, holder, "saihm_remember", {"content": text.format(i=i)})
        assert status == 200
        ids.append(body["cellId"])
    return ids


async def test_without_extension_params_every_cell_in_log_order(client, holder, call) -> None:
    ids = await remember(client, holder, call, 5)
    for params in ({}, {"query": ""}, {"query": "   "}):
        status, body, headers = await post(client, holder, params)
        assert status == 200
        assert [item["cellId"] for item in body] == ids
        assert headers[CUT_HEADER] == "false"
        assert NEXT_HEADER not in headers
        assert all("score" not in item for item in body)
        assert all(item["kind"] == "memory" and item["namespace"] == "memory" for item in body)


async def test_the_issue_example_is_found_and_scored(client, holder, call) -> None:
    await remember(client, holder, call, 1, "The user prefers dark mode")
    await remember(client, holder, call, 3, "meeting {i} at noon")
    status, body, _ = await post(client, holder, {"query": "what theme does the user like?"})
    assert status == 200
    assert [item["plaintext"] for item in body] == ["The user prefers dark mode"]
    assert body[0]["score"] > 0
    status, body, _ = await post(client, holder, {"query": "zebra quokka"})
    assert (status, body) == (200, [])


async def test_limit_and_cursor_page_through_all_cells_once(client, holder, call) -> None:
    ids = await remember(client, holder, call, 7)
    seen, params = [], {"limit": 3}
    while True:
        status, body, headers = await post(client, holder, params)
        assert status == 200 and len(body) <= 3
        seen += [item["cellId"] for item in body]
        if headers[CUT_HEADER] == "false":
            assert NEXT_HEADER not in headers
            break
        params = {"limit": 3, "cursor": headers[NEXT_HEADER]}
        if len(seen) == 3:
            # A cell erased between pages moves nothing: paging is by log position.
            status, _ = await call(client, holder, "saihm_forget", {"id": ids[1]})
            assert status == 200
    assert seen == ids


async def test_paging_a_ranked_answer(client, holder, call) -> None:
    await remember(client, holder, call, 6, "river {i} " + "river " * 3)
    first = await post(client, holder, {"query": "river", "limit": 4})
    assert first[2][CUT_HEADER] == "true"
    rest = await post(client, holder, {"query": "river", "cursor": first[2][NEXT_HEADER]})
    all_at_once = await post(client, holder, {"query": "river"})
    got = [i["cellId"] for i in first[1]] + [i["cellId"] for i in rest[1]]
    assert got == [i["cellId"] for i in all_at_once[1]]
    scores = [i["score"] for i in all_at_once[1]]
    assert scores == sorted(scores, reverse=True)


async def test_max_bytes_bounds_the_answer_and_never_cuts_an_item(client, holder, call) -> None:
    await remember(client, holder, call, 20, "note {i} " + "x" * 300)
    status, body, headers = await post(client, holder, {"maxBytes": 2000})
    assert status == 200
    assert headers["_bytes"] <= 2000
    assert 1 <= len(body) < 20 and headers[CUT_HEADER] == "true"
    assert all(item["plaintext"].endswith("x" * 300) for item in body)
    # One item larger than the bound is still returned whole, so paging always progresses.
    status, body, headers = await post(client, holder, {"maxBytes": 10})
    assert status == 200 and len(body) == 1 and headers[CUT_HEADER] == "true"


async def test_namespaces_and_kinds_only_narrow(client, holder, call) -> None:
    await call(client, holder, "saihm_remember", {"content": "work item", "namespace": "work"})
    await call(client, holder, "saihm_remember", {"content": "memory item"})
    await call(client, holder, "saihm_record", {"content": "said item", "kind": "said"})
    _, body, _ = await post(client, holder, {"namespaces": ["work"]})
    assert [i["plaintext"] for i in body] == ["work item"]
    _, body, _ = await post(client, holder, {"kinds": ["said"]})
    assert [(i["plaintext"], i["kind"], i["namespace"]) for i in body] == [
        ("said item", "said", "record")
    ]
    _, body, _ = await post(client, holder, {"namespaces": ["elsewhere"]})
    assert body == []


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"limit": 0}, "invalid_limit"),
        ({"limit": -1}, "invalid_limit"),
        ({"limit": "ten"}, "invalid_limit"),
        ({"limit": True}, "invalid_limit"),
        ({"limit": 10**12}, "invalid_limit"),
        ({"maxBytes": 0}, "invalid_max_bytes"),
        ({"maxBytes": 1.5}, "invalid_max_bytes"),
        ({"cursor": "zzz"}, "invalid_cursor"),
        ({"cursor": 5}, "invalid_cursor"),
        ({"cursor": "q3"}, "invalid_cursor"),
        ({"query": "river", "cursor": "a3"}, "invalid_cursor"),
        ({"namespaces": []}, "invalid_filter"),
        ({"namespaces": "work"}, "invalid_filter"),
        ({"kinds": ["secret"]}, "invalid_filter"),
        ({"kinds": [1]}, "invalid_filter"),
        ({"sessions": "all"}, "unknown_param"),
    ],
)
async def test_bad_extension_params_are_refused(client, holder, call, params, code) -> None:
    await remember(client, holder, call, 2)
    status, body, _ = await post(client, holder, params)
    assert (status, body) == (400, {"error": code})


async def test_limit_as_a_decimal_string(client, holder, call) -> None:
    await remember(client, holder, call, 3)
    status, body, headers = await post(client, holder, {"limit": "2"})
    assert status == 200 and len(body) == 2 and headers[CUT_HEADER] == "true"
