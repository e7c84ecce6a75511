"""The public read-only log API (DESIGN.md "HTTP": paths and JSON shapes pinned)."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor

import pytest

from saihm.protocol import call as binding_call
from saihm.translog import leaf_hash, verify_consistency, verify_inclusion
from saihm.translog.checkpoint import verify_checkpoint
from saihm.translog.tiles import decode_entry_bundle

IMMUTABLE = "public, max-age=31536000, immutable"


async def get(client, url):
    async with client.get(url) as resp:
        return resp.status, resp.headers, await resp.read()


async def get_json(client, url):
    async with client.get(url) as resp:
        return resp.status, resp.headers, await resp.json()


async def checkpoint(client):
    status, headers, note = await get(client, "/log/checkpoint")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    assert "immutable" not in headers["Cache-Control"]
    _, _, keys = await get_json(client, "/log/v1/keys")
    return verify_checkpoint(note, [k["vkey"] for k in keys["checkpointKeys"]])


async def test_checkpoint_is_a_signed_note_for_the_current_size(client, holder, operator, call):
    await call(client, holder, "saihm_remember", {"content": "a"})
    head = await checkpoint(client)
    assert head.size == operator.store.size()
    assert head.root_hash == operator.store.root(head.size)


async def test_keys_name_their_algorithms_and_the_authority_key(client, authority):
    status, _, keys = await get_json(client, "/log/v1/keys")
    assert status == 200
    assert sorted(k["algorithm"] for k in keys["checkpointKeys"]) == ["Ed25519", "ML-DSA-44"]
    assert {k["type"] for k in keys["checkpointKeys"]} == {1, 6}
    assert keys["authority"]["algorithm"] == "ML-DSA-65"
    assert keys["authority"]["encoding"] == "base64"
    assert base64.b64decode(keys["authority"]["publicKey"]) == authority.public_key


async def test_entries_are_the_leaves_and_immutable_below_the_checkpoint(client, holder, operator):
    head = await checkpoint(client)
    status, headers, body = await get_json(client, f"/log/v1/entries?start=0&end={head.size}")
    assert status == 200 and headers["Cache-Control"] == IMMUTABLE
    leaves = operator.store.leaves(0, head.size)
    assert body["entries"] == [
        {"index": i, "leaf": base64.b64encode(leaf).decode()} for i, leaf in enumerate(leaves)
    ]


@pytest.mark.parametrize(
    "query",
    [
        "",
        "start=0",
        "end=1",
        "start=-1&end=1",
        "start=a&end=1",
        "start=0&end=1.0",
        "start=00&end=1",
        "start=+0&end=1",
        "start=1&end=1",
        "start=1&end=0",
        "start=0&end=1001",
        "start=0&end=1&x=1",
        "start=0&start=0&end=1",
        "start=0&end=99999999999999999999999",
    ],
)
async def test_bad_entries_queries_are_bad_request(client, holder, query):
    status, headers, body = await get_json(client, f"/log/v1/entries?{query}")
    assert (status, body) == (400, {"error": "bad_request"})
    assert headers["Cache-Control"] == "no-store"


async def test_entries_beyond_the_tree_are_not_found(client, operator):
    size = operator.store.size()
    status, _, body = await get_json(client, f"/log/v1/entries?start=0&end={size + 1}")
    assert (status, body) == (404, {"error": "not_found"})


async def test_inclusion_proof_verifies_against_the_checkpoint(client, holder, operator, call):
    for n in range(3):
        await call(client, holder, "saihm_remember", {"content": f"m{n}"})
    head = await checkpoint(client)
    for index in range(head.size):
        status, headers, body = await get_json(
            client, f"/log/v1/proof/inclusion?index={index}&size={head.size}"
        )
        assert status == 200 and headers["Cache-Control"] == IMMUTABLE
        assert (body["index"], body["size"]) == (index, head.size)
        proof = [bytes.fromhex(h) for h in body["proof"]]
        leaf = operator.store.leaves(index, index + 1)[0]
        verify_inclusion(leaf_hash(leaf), index, head.size, proof, head.root_hash)


async def test_bad_inclusion_queries(client, holder, operator):
    size = operator.store.size()
    for query, status in [
        (f"index={size}&size={size}", 400),
        (f"index=0&size={size + 1}", 404),
        ("index=0", 400),
        ("index=x&size=1", 400),
        ("index=0&size=0", 400),
    ]:
        got, _, body = await get_json(client, f"/log/v1/proof/inclusion?{query}")
        assert got == status and "error" in body, query


async def test_consistency_proof_between_checkpoints(client, holder, call):
    first = await checkpoint(client)
    await call(client, holder, "saihm_remember", {"content": "later"})
    second = await checkpoint(client)
    assert second.size > first.size
    status, headers, body = await get_json(
        client, f"/log/v1/proof/consistency?first={first.size}&second={second.size}"
    )
    assert status == 200 and headers["Cache-Control"] == IMMUTABLE
    assert (body["first"], body["second"]) == (first.size, second.size)
    proof = [bytes.fromhex(h) for h in body["proof"]]
    verify_consistency(first.size, second.size, proof, first.root_hash, second.root_hash)


async def test_bad_consistency_queries(client, operator):
    size = operator.store.size()
    for query, status in [
        ("first=0&second=1", 400),
        (f"first={size}&second={size - 1}", 400),
        (f"first=1&second={size + 1}", 404),
        ("first=1", 400),
    ]:
        got, _, body = await get_json(client, f"/log/v1/proof/consistency?{query}")
        assert got == status and "error" in body, query


async def test_receipt_by_id_and_its_json_form(client, holder, call):
    _, remembered = await call(client, holder, "saihm_remember", {"content": "r"})
    status, _, listed = await get_json(client, f"/log/v1/receipts?subjectId={remembered['cellId']}")
    assert status == 200 and len(listed["receipts"]) == 1 and listed["next"] is None
    entry = listed["receipts"][0]
    receipt = entry["receipt"]
    assert receipt["operation"] == "REMEMBER" and receipt["subjectId"] == remembered["cellId"]
    assert receipt["holderId"] == holder.holder_id.hex()
    assert isinstance(receipt["timestamp"], str) and receipt["timestamp"].isdigit()
    assert receipt["detail"] is None
    status, headers, by_id = await get_json(client, f"/log/v1/receipts/{receipt['receiptId']}")
    assert status == 200 and headers["Cache-Control"] == IMMUTABLE
    assert by_id == entry
    from saihm.events import Receipt

    decoded = Receipt.from_cbor(base64.b64decode(by_id["cbor"]))
    assert decoded.receipt_id.hex() == receipt["receiptId"]
    assert decoded.signature.hex() == receipt["signature"]
    assert decoded.receipt_nonce.hex() == receipt["receiptNonce"]


async def test_key_and_propose_details_in_json_form(client, holder, operator, call):
    status, _, listed = await get_json(
        client, f"/log/v1/receipts?subjectId={holder.holder_id.hex()}"
    )
    key = next(e["receipt"] for e in listed["receipts"] if e["receipt"]["operation"] == "KEY")
    assert key["detail"] == operator.store.holder_key(holder.holder_id).public_key.hex()
    _, proposal = await call(
        client, holder, "saihm_governance_propose", {"scope": "protocol_upgrade"}
    )
    status, _, by_id = await get_json(client, f"/log/v1/receipts/{proposal['receiptId']}")
    assert status == 200
    detail = by_id["receipt"]["detail"]
    assert detail["scope"] == "protocol_upgrade"
    assert detail["snapshotEpoch"] == proposal["snapshotEpoch"]
    assert isinstance(detail["snapshotEpoch"], str)


async def test_receipt_lookups_refuse_bad_ids(client):
    for url, status in [
        ("/log/v1/receipts/" + "AB" * 32, 400),
        ("/log/v1/receipts/abc", 400),
        ("/log/v1/receipts/" + "ab" * 32, 404),
    ]:
        got, headers, body = await get_json(client, url)
        assert got == status and "error" in body, url
        assert headers["Cache-Control"] == "no-store"


async def test_receipt_lists_page_by_cursor(client, operator, authority, make_holder):
    for _ in range(3):
        make_holder(operator, authority)
    seen, cursor = [], 0
    while cursor is not None:
        status, _, page = await get_json(
            client, f"/log/v1/receipts?operation=KEY&limit=2&cursor={cursor}"
        )
        assert status == 200 and len(page["receipts"]) <= 2
        seen.extend(e["index"] for e in page["receipts"])
        cursor = page["next"]
    assert len(seen) == 3 and seen == sorted(seen)
    status, _, by_holder = await get_json(
        client, f"/log/v1/receipts?holderId={operator.store.leaves(0, 1) and 'ab' * 32}"
    )
    assert status == 200 and by_holder == {"receipts": [], "next": None}


@pytest.mark.parametrize(
    "query",
    [
        "",
        "operation=NOPE",
        "subjectId=" + "AB" * 32,
        "operation=KEY&since=x",
        "since=-1",
        "since=10&until=10",
        "since=11&until=10",
        "until=01",
        "operation=KEY&operation=KEY",
        "holderId=xyz",
        "operation=KEY&limit=0",
        "operation=KEY&limit=1001",
        "operation=KEY&cursor=-1",
        "operation=KEY&sort=desc",
    ],
)
async def test_bad_receipt_list_queries(client, query):
    status, _, body = await get_json(client, f"/log/v1/receipts?{query}")
    assert (status, body) == (400, {"error": "bad_request"})


async def _all_pages(client, query: str) -> tuple[list[int], int]:
    """Every index a receipts query lists, following ``next``; and how many calls it took."""
    seen, cursor, calls = [], 0, 0
    while cursor is not None:
        status, _, page = await get_json(client, f"/log/v1/receipts?{query}&cursor={cursor}")
        assert status == 200, page
        seen.extend(e["index"] for e in page["receipts"])
        cursor, calls = page["next"], calls + 1
        assert calls < 100
    return seen, calls


async def test_receipt_filters_combine(client, operator, authority, holder, make_holder, call):
    other = make_holder(operator, authority)
    for i in range(3):
        await call(client, holder, "saihm_remember", {"content": f"mine {i}"})
        await call(client, other, "saihm_remember", {"content": f"theirs {i}"})
    leaves = operator.store.leaves(0, operator.store.size())
    from saihm.events import Receipt

    log = [Receipt.from_cbor(leaf) for leaf in leaves]
    mine = holder.holder_id.hex()

    def want(pred) -> list[int]:
        return [i for i, r in enumerate(log) if pred(r)]

    seen, _ = await _all_pages(client, f"holderId={mine}&operation=REMEMBER&limit=2")
    assert seen == want(lambda r: r.holder_id == holder.holder_id and r.operation == "REMEMBER")
    assert len(seen) == 3
    stamps = sorted({r.timestamp for r in log})
    since, until = stamps[0], stamps[-1] + 1
    seen, _ = await _all_pages(client, f"since={since}&until={until}")
    assert seen == list(range(len(log)))
    seen, _ = await _all_pages(client, f"until={stamps[0]}")
    assert seen == []
    seen, _ = await _all_pages(client, f"operation=REMEMBER&since={since}&holderId={mine}")
    assert seen == want(lambda r: r.holder_id == holder.holder_id and r.operation == "REMEMBER")
    subject = log[seen[0]].subject_id.hex()
    seen, _ = await _all_pages(client, f"subjectId={subject}&holderId={other.holder_id.hex()}")
    assert seen == []  # another holder's cell


async def test_a_filtered_scan_is_bounded_and_pages_on(
    client, operator, holder, call, monkeypatch
) -> None:
    from saihm.http import log_api

    for i in range(5):
        await call(client, holder, "saihm_remember", {"content": f"n {i}"})
    monkeypatch.setattr(log_api, "MAX_SCAN", 2)
    size = operator.store.size()
    seen, calls = await _all_pages(client, "since=0&limit=1000")
    assert seen == list(range(size)) and calls >= size // 2
    # Nothing matches (every receipt is later than 1970): a short, empty page that goes on.
    status, _, page = await get_json(client, "/log/v1/receipts?since=0&until=1")
    assert status == 200 and page["receipts"] == [] and page["next"] == 2


async def test_erasures_list_the_forgotten_cells(client, holder, operator, call):
    await call(client, holder, "saihm_remember", {"content": "keep"})
    _, gone = await call(client, holder, "saihm_remember", {"content": "drop"})
    await call(client, holder, "saihm_forget", {"id": gone["cellId"]})
    status, headers, body = await get_json(client, "/log/v1/erasures")
    assert status == 200 and "immutable" not in headers["Cache-Control"]
    assert body == {"cellIds": [gone["cellId"]], "treeSize": operator.store.size()}


@pytest.fixture
def full_tile(operator, holder):
    """At least 257 leaves, so level-0 tile 0 is full (C2SP tlog-tiles)."""
    need = 257 - operator.store.size()
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda _: binding_call(operator, holder.token, "saihm_status", {}), range(need)
            )
        )
    return operator.store.size()


async def test_tiles_and_entry_bundles(client, operator, full_tile):
    size = full_tile
    status, headers, tile = await get(client, "/log/tile/0/000")
    assert status == 200 and headers["Cache-Control"] == IMMUTABLE
    assert headers["Content-Type"] == "application/octet-stream"
    leaves = operator.store.leaves(0, size)
    assert tile == b"".join(leaf_hash(leaf) for leaf in leaves[:256])
    status, headers, bundle = await get(client, "/log/tile/entries/000")
    assert status == 200 and headers["Cache-Control"] == IMMUTABLE
    assert decode_entry_bundle(bundle) == leaves[:256]
    width = size - 256
    status, headers, partial = await get(client, f"/log/tile/0/001.p/{width}")
    assert status == 200 and "immutable" not in headers["Cache-Control"]
    assert partial == b"".join(leaf_hash(leaf) for leaf in leaves[256:size])
    status, _, partial_bundle = await get(client, f"/log/tile/entries/001.p/{width}")
    assert status == 200 and decode_entry_bundle(partial_bundle) == leaves[256:size]
    status, _, level1 = await get(client, "/log/tile/1/000.p/1")
    assert status == 200 and len(level1) == 32


@pytest.mark.parametrize(
    "path, status",
    [
        ("0/1", 400),
        ("0/0001", 400),
        ("00/000", 400),
        ("64/000", 400),
        ("0/000.p/256", 400),
        ("0/000.p/0", 400),
        ("0/x000/000", 400),
        ("entries/abc", 400),
        ("0/-01", 400),
        ("0/999", 404),
        ("entries/999", 404),
        ("0/000.p/255", 404),
        ("3/000", 404),
    ],
)
async def test_bad_tile_paths(client, holder, path, status):
    got, headers, body = await get(client, f"/log/tile/{path}")
    assert got == status, path
    assert b'"error"' in body and headers["Cache-Control"] == "no-store"


async def test_the_app_runs_the_submitter_it_is_handed_and_stops_it(
    aiohttp_client, operator
) -> None:
    """The log API runs whatever witness submitter the composition hands ``create_app`` (the
    ``Submitter`` protocol), keeps it under ``SUBMITTER``, and stops it when the app stops;
    the HTTP package itself builds none."""
    import asyncio

    from saihm.http.app import create_app
    from saihm.http.log_api import SUBMITTER

    class Recording:
        def __init__(self) -> None:
            self.started = asyncio.Event()
            self.stopped = False

        async def run(self) -> None:
            self.started.set()
            await asyncio.Event().wait()

        def stop(self) -> None:
            self.stopped = True

        def snapshot(self) -> dict[str, dict[str, object]]:
            return {}

    submitter = Recording()
    app = create_app(operator, submitter=submitter)
    client = await aiohttp_client(app)
    await asyncio.wait_for(submitter.started.wait(), 30)
    assert app[SUBMITTER] is submitter and not submitter.stopped
    await client.close()
    assert submitter.stopped
