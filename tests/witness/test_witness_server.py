"""``saihm witness serve``'s add-checkpoint, status by status as c2sp.org/tlog-witness says,
its durable per-origin state (also with two processes racing), and the operator's submitter
against it (409 retries, a witness that is down, bad answers)."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from pathlib import Path

import aiohttp
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saihm.services.witness import Refused, Witness, create_witness_app, load_or_create_key
from saihm.translog import Checkpoint, LogKeys
from saihm.translog.note import parse_note
from saihm.translog.witness import (
    CosignatureV1Signer,
    add_checkpoint_body,
    verify_cosignatures,
)
from saihm.witness.state import WitnessState
from saihm.witness.submit import Submitter, WitnessError, parse_witness
from tests.translog.reftree import ref_root
from tests.witness.fakelog import FakeLog
from tests.witness.fakelog import log_keys as _keys

ORIGIN_A = "a.example/log"
ORIGIN_B = "b.example/log"


@pytest.fixture
def signer() -> CosignatureV1Signer:
    return CosignatureV1Signer("witness.example/w", Ed25519PrivateKey.generate())


@pytest.fixture
def witness(tmp_path: Path, signer) -> Witness:
    keys = [*_keys(ORIGIN_A).verifier_keys(), _keys(ORIGIN_B).verifier_keys()[0]]
    state = WitnessState(tmp_path / "w")
    yield Witness(state, signer, keys)
    state.close()


async def _post(client, body: bytes) -> tuple[int, str, bytes]:
    async with client.post("/add-checkpoint", data=body) as resp:
        return resp.status, resp.content_type, await resp.read()


@pytest.fixture
async def client(aiohttp_client, witness):
    return await aiohttp_client(create_witness_app(witness))


# -- add-checkpoint statuses -------------------------------------------------------------------


async def test_first_checkpoint_is_cosigned_and_the_state_is_kept(client, witness, signer):
    log = FakeLog(_keys(ORIGIN_A), 10)
    status, _, body = await _post(client, add_checkpoint_body(0, [], log.note()))
    assert status == 200, body
    assert body.startswith("\u2014 witness.example/w ".encode()) and body.endswith(b"\n")
    names = verify_cosignatures(log.note() + body, [signer.vkey()], 1)
    assert names == ["witness.example/w"]
    head = witness.state.head(ORIGIN_A)
    assert (head.size, head.root_hash) == (10, ref_root(log.hashes))


async def test_a_consistent_larger_checkpoint_is_cosigned(client, signer):
    log = FakeLog(_keys(ORIGIN_A), 10)
    assert (await _post(client, add_checkpoint_body(0, [], log.note())))[0] == 200
    log.grow(7)
    status, _, body = await _post(client, add_checkpoint_body(10, log.proof(10), log.note()))
    assert status == 200
    assert verify_cosignatures(log.note() + body, [signer.vkey()], 1)


async def test_unknown_origin_is_404(client):
    """tlog-witness: "If the checkpoint origin is unknown, the witness MUST respond with a 404"."""
    log = FakeLog(_keys("c.example/log"), 3)
    assert (await _post(client, add_checkpoint_body(0, [], log.note())))[0] == 404


async def test_no_trusted_signature_is_403(client):
    """tlog-witness: "If none of the signatures verify against a trusted public key ...
    403"; a note by another key under the same origin is such a note."""
    impostor = LogKeys(ORIGIN_A, Ed25519PrivateKey.generate(), bytes(32))
    note = impostor.sign(Checkpoint(ORIGIN_A, 3, ref_root(FakeLog(impostor, 3).hashes)))
    assert (await _post(client, add_checkpoint_body(0, [], note)))[0] == 403


async def test_old_size_above_the_checkpoint_size_is_400(client):
    log = FakeLog(_keys(ORIGIN_A), 5)
    assert (await _post(client, add_checkpoint_body(6, [], log.note())))[0] == 400


@pytest.mark.parametrize("body", [b"", b"old 0\n", b"garbage\n\nmore\n", b"old x\n\n"])
async def test_malformed_bodies_are_400_and_change_nothing(client, witness, body):
    status, kind, answer = await _post(client, body)
    assert (status, kind) == (400, "application/json")
    assert answer == b'{"error": "bad_request"}'
    assert witness.state.head(ORIGIN_A) is None


async def test_old_size_mismatch_is_409_with_the_witness_size(client):
    """tlog-witness: "If it doesn't match, the witness MUST respond with a 409 Conflict ...
    body MUST consist of the tree size of the latest cosigned checkpoint in decimal, followed by a
    newline ... Content-Type of text/x.tlog.size"."""
    log = FakeLog(_keys(ORIGIN_A), 10)
    await _post(client, add_checkpoint_body(0, [], log.note()))
    log.grow(5)
    status, kind, body = await _post(client, add_checkpoint_body(4, log.proof(4), log.note()))
    assert (status, kind, body) == (409, "text/x.tlog.size", b"10\n")


async def test_rollback_is_refused(client, witness):
    """A log presenting a smaller tree than the witness cosigned gets 409 (or 400 when it
    claims the witness's size as old size); the head never moves back."""
    log = FakeLog(_keys(ORIGIN_A), 20)
    await _post(client, add_checkpoint_body(0, [], log.note()))
    assert (await _post(client, add_checkpoint_body(0, [], log.note(12))))[:3] == (
        409,
        "text/x.tlog.size",
        b"20\n",
    )
    assert (await _post(client, add_checkpoint_body(20, [], log.note(12))))[0] == 400
    assert witness.state.head(ORIGIN_A).size == 20


async def test_fork_at_the_same_size_is_409_and_kept_as_evidence(client, witness):
    """tlog-witness: "If the old size matches the checkpoint size, the witness MUST check
    that the root hashes are also identical. If they don't match ... 409 Conflict"."""
    keys = _keys(ORIGIN_A)
    honest, forked = FakeLog(keys, 8), FakeLog(keys, 8, tag=b"fork")
    await _post(client, add_checkpoint_body(0, [], honest.note()))
    status, _, body = await _post(client, add_checkpoint_body(8, [], forked.note()))
    assert (status, body) == (409, b"8\n")
    assert witness.state.head(ORIGIN_A).root_hash == ref_root(honest.hashes)
    assert len(witness.state.evidence()) == 1


async def test_fork_beyond_the_witness_size_fails_the_proof_with_422(client, witness):
    """tlog-witness: "If the Merkle Consistency Proof doesn't verify, the witness MUST
    respond with a 422 Unprocessable Entity"."""
    keys = _keys(ORIGIN_A)
    honest = FakeLog(keys, 8)
    await _post(client, add_checkpoint_body(0, [], honest.note()))
    forked = FakeLog(keys, 8, tag=b"fork")
    forked.grow(8)
    status, _, _ = await _post(client, add_checkpoint_body(8, forked.proof(8), forked.note()))
    assert status == 422
    honest.grow(8)
    wrong = honest.proof(8)[:-1]  # a truncated proof of the honest log
    assert (await _post(client, add_checkpoint_body(8, wrong, honest.note())))[0] == 422
    assert witness.state.head(ORIGIN_A).size == 8


async def test_a_proof_with_old_size_zero_must_be_empty(client):
    """tlog-witness: "The proof MUST be empty if the old size is zero"."""
    log = FakeLog(_keys(ORIGIN_A), 4)
    body = add_checkpoint_body(0, [bytes(32)], log.note())
    assert (await _post(client, body))[0] == 422


async def test_two_origins_have_separate_state(client, witness):
    """tlog-witness keeps "the latest checkpoint" per log, "uniquely identified by its origin
    line": a witness tells two logs apart by origin."""
    a, b = FakeLog(_keys(ORIGIN_A), 30), FakeLog(_keys(ORIGIN_B), 3)
    assert (await _post(client, add_checkpoint_body(0, [], a.note())))[0] == 200
    assert (await _post(client, add_checkpoint_body(0, [], b.note())))[0] == 200
    assert witness.state.head(ORIGIN_A).size == 30
    assert witness.state.head(ORIGIN_B).size == 3
    # Log B's key cannot speak for log A's origin.
    b_as_a = _keys(ORIGIN_B)
    fake = LogKeys(ORIGIN_A, b_as_a._ed25519._key, b_as_a._seed).sign(
        Checkpoint(ORIGIN_A, 31, bytes(32))
    )
    assert (await _post(client, add_checkpoint_body(30, [], fake)))[0] == 403


async def test_unknown_paths_and_methods_answer_json(client):
    async with client.get("/add-checkpoint") as resp:
        assert resp.status == 405 and await resp.json() == {"error": "bad_request"}
    async with client.get("/nope") as resp:
        assert resp.status == 404 and await resp.json() == {"error": "not_found"}


async def test_an_oversized_body_is_413(client):
    assert (await _post(client, b"old 0\n" + b"A" * 70_000))[0] == 413


# -- durable state -----------------------------------------------------------------------------


def test_state_survives_reopening(tmp_path, signer):
    keys = _keys(ORIGIN_A)
    log = FakeLog(keys, 9)
    state = WitnessState(tmp_path / "w")
    Witness(state, signer, keys.verifier_keys()).add_checkpoint(
        add_checkpoint_body(0, [], log.note())
    )
    state.close()
    again = WitnessState(tmp_path / "w")
    try:
        with pytest.raises(Refused) as refused:
            Witness(again, signer, keys.verifier_keys()).add_checkpoint(
                add_checkpoint_body(0, [], log.note())
            )
        assert (refused.value.status, refused.value.size) == (409, 9)
    finally:
        again.close()


def test_a_witness_with_both_keys_returns_both_lines(tmp_path, signer):
    from saihm.translog.witness import SubtreeV1Signer

    keys = _keys(ORIGIN_A)
    pq = SubtreeV1Signer(signer.name, bytes(32))
    state = WitnessState(tmp_path / "w")
    try:
        witness = Witness(state, signer, keys.verifier_keys(), mldsa44=pq)
        log = FakeLog(keys, 4)
        lines = witness.add_checkpoint(add_checkpoint_body(0, [], log.note()))
        merged = log.note() + lines
        assert len(parse_note(merged)[1]) == 4
        for vkey in (signer.vkey(), pq.vkey()):
            assert verify_cosignatures(merged, [vkey], 1) == [signer.name]
    finally:
        state.close()


def test_the_key_is_created_once_mode_0600_and_its_name_cannot_change(tmp_path):
    from saihm.services.witness import load_keys

    path = tmp_path / "state" / "witness.key"
    signer, created = load_or_create_key(path, None)
    ed25519, mldsa44 = load_keys(path)
    assert ed25519.vkey() == signer.vkey() and mldsa44.name == signer.name
    assert created and signer.name.startswith("witness.localhost/")
    assert path.stat().st_mode & 0o777 == 0o600
    again, created = load_or_create_key(path, None)
    assert not created and again.vkey() == signer.vkey()
    with pytest.raises(Exception, match="named"):
        load_or_create_key(path, "other.example/w")


def _race(state_dir: str, skey: str, vkeys: list[str], size: int, start, out) -> None:
    keys = _keys(ORIGIN_A)
    log = FakeLog(keys, size)
    state = WitnessState(state_dir)
    witness = Witness(state, CosignatureV1Signer.from_skey(skey), vkeys)
    start.wait()
    try:
        witness.add_checkpoint(add_checkpoint_body(0, [], log.note()))
        out.put((size, 200))
    except Refused as refused:
        out.put((size, refused.status))
    finally:
        state.close()


def test_two_processes_racing_on_one_state_cannot_both_advance_from_the_same_size(tmp_path, signer):
    """tlog-witness: "checking the old size against the latest checkpoint and persisting the
    new checkpoint must be performed atomically". Four processes submit ``old 0`` at once
    with different sizes: exactly one is cosigned, the others get 409, and the stored head is
    the winner's."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    vkeys = _keys(ORIGIN_A).verifier_keys()
    WitnessState(tmp_path / "w").close()
    procs = [
        ctx.Process(target=_race, args=(str(tmp_path / "w"), signer.skey(), vkeys, n, start, out))
        for n in (5, 6, 7, 8)
    ]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    winners = [size for size, status in results if status == 200]
    assert len(winners) == 1
    assert sorted(status for _, status in results) == [200, 409, 409, 409]
    state = WitnessState(tmp_path / "w")
    try:
        assert state.head(ORIGIN_A).size == winners[0]
    finally:
        state.close()


# -- the operator's submitter ------------------------------------------------------------------


async def test_submitter_retries_from_the_witness_size_after_409(aiohttp_server, witness, tmp_path):
    """The witness cosigned size 10 before (another copy of the submitter's status was lost):
    the first request says ``old 0``, gets 409 "10", and the retry carries the proof 10 -> 25."""
    log = FakeLog(_keys(ORIGIN_A), 10)
    witness.add_checkpoint(add_checkpoint_body(0, [], log.note()))
    log.grow(15)
    server = await aiohttp_server(create_witness_app(witness))
    endpoint = parse_witness(f"http://127.0.0.1:{server.port}={witness.signer.vkey()}")
    submitter = Submitter(log, [endpoint], tmp_path)
    async with aiohttp.ClientSession() as session:
        assert await submitter.submit_once(session, endpoint) is True
        assert await submitter.submit_once(session, endpoint) is False  # already cosigned
    status = submitter.status[endpoint.name]
    assert (status.witness_size, status.cosigned_size, status.failures) == (25, 25, 0)
    assert status.last_current >= status.last_success  # seen current after cosigning
    assert verify_cosignatures(log.stored[25], [witness.signer.vkey()], 1)


async def test_submitter_reports_a_rolled_back_log(aiohttp_server, witness, tmp_path):
    big = FakeLog(_keys(ORIGIN_A), 40)
    witness.add_checkpoint(add_checkpoint_body(0, [], big.note()))
    small = FakeLog(_keys(ORIGIN_A), 12)
    server = await aiohttp_server(create_witness_app(witness))
    endpoint = parse_witness(f"http://127.0.0.1:{server.port}={witness.signer.vkey()}")
    submitter = Submitter(small, [endpoint], tmp_path)
    async with aiohttp.ClientSession() as session:
        with pytest.raises(WitnessError, match="rolled back"):
            await submitter.submit_once(session, endpoint)
    assert len(parse_note(small.stored[12])[1]) == 2  # no cosignature added


async def test_a_witness_that_is_down_backs_off_and_records_the_failure(tmp_path, signer):
    """Nothing listens on the port: each attempt fails fast, the failure is counted and the
    status file says so; the loop keeps running until stopped."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = FakeLog(_keys(ORIGIN_A), 3)
    endpoint = parse_witness(f"http://127.0.0.1:{port}={signer.vkey()}")
    submitter = Submitter(log, [endpoint], tmp_path, interval=0.01, timeout=1.0)
    task = asyncio.create_task(submitter.run())
    deadline = time.monotonic() + 20
    while submitter.status[endpoint.name].failures < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    submitter.stop()
    await asyncio.wait_for(task, 10)
    status = submitter.status[endpoint.name]
    assert status.failures >= 3 and status.last_success is None
    assert status.last_error.startswith("unreachable")
    saved = (tmp_path / "witness-status.json").read_text()
    assert '"lastError": "unreachable' in saved


async def test_a_response_without_the_witness_key_is_not_kept(aiohttp_server, tmp_path, signer):
    """tlog-witness: "The client MUST ignore any cosignatures from unknown keys"; when nothing
    from the configured key comes back, nothing is stored."""
    other = CosignatureV1Signer("witness.example/other", Ed25519PrivateKey.generate())
    log = FakeLog(_keys(ORIGIN_A), 3)
    body = log.note()[: log.note().rindex(b"\n\n") + 1]

    async def handler(request):
        from aiohttp import web

        return web.Response(body=other.cosign(body), content_type="text/plain")

    from aiohttp import web

    app = web.Application()
    app.router.add_post("/add-checkpoint", handler)
    server = await aiohttp_server(app)
    endpoint = parse_witness(f"http://127.0.0.1:{server.port}={signer.vkey()}")
    submitter = Submitter(log, [endpoint], tmp_path)
    async with aiohttp.ClientSession() as session:
        with pytest.raises(WitnessError, match="no cosignature from the configured key"):
            await submitter.submit_once(session, endpoint)
    assert len(parse_note(log.stored[3])[1]) == 2


@pytest.mark.parametrize(
    "spec",
    [
        "127.0.0.1:80=x",
        "ftp://127.0.0.1=",
        "http://127.0.0.1",
        "http://127.0.0.1?x=1",
    ],
)
def test_bad_witness_specs_are_refused(spec, signer):
    from saihm.errors import MalformedInput

    with pytest.raises(MalformedInput):
        parse_witness(spec.replace("=x", "=" + signer.vkey()) if "=x" in spec else spec)


def test_a_witness_url_may_hold_an_equals_sign(signer):
    endpoint = parse_witness(f"https://w.example/a=b={signer.vkey()}")
    assert (endpoint.url, endpoint.vkey) == ("https://w.example/a=b", signer.vkey())


# -- hostile input -----------------------------------------------------------------------------


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_mutated_request_is_refused_with_a_spec_status_or_cosigned_and_never_crashes(
    witness, data
) -> None:
    """Any byte edit, insertion or truncation of a valid request: 200 (only if it still
    carries a valid, consistent checkpoint) or one of the spec's refusals; nothing else."""
    log = FakeLog(_keys(ORIGIN_A), 12)
    body = bytearray(add_checkpoint_body(0, [], log.note()))
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "insert", "cut"]))
        at = data.draw(st.integers(0, len(body) - 1))
        if kind == "flip":
            body[at] ^= data.draw(st.integers(1, 255))
        elif kind == "insert":
            body[at:at] = data.draw(st.binary(min_size=1, max_size=3))
        else:
            del body[at:]
            if not body:
                body = bytearray(b"x")
    before = witness.state.head(ORIGIN_A)
    try:
        witness.add_checkpoint(bytes(body))
    except Refused as refused:
        assert refused.status in (400, 403, 404, 409, 422)
        assert witness.state.head(ORIGIN_A) == before


@pytest.mark.parametrize(
    ("status", "kind", "body", "error"),
    [
        (200, "text/plain", b"garbage\n", "malformed cosignature response"),
        (200, "text/plain", b"\xe2\x80\x94 w " + b"A" * 70_000 + b"\n", "too large"),
        (409, "text/x.tlog.size", b"ten\n", "malformed text/x.tlog.size"),
        (409, "text/x.tlog.size", b"007\n", "malformed text/x.tlog.size"),
        (409, "text/plain", b"5\n", "HTTP 409"),
        (500, "application/json", b"{}", "HTTP 500"),
        (404, "application/json", b"{}", "HTTP 404"),
    ],
)
async def test_a_hostile_witness_answer_is_an_error_and_stores_nothing(
    aiohttp_server, tmp_path, signer, status, kind, body, error
) -> None:
    from aiohttp import web

    async def handler(request):
        return web.Response(status=status, body=body, content_type=kind)

    app = web.Application()
    app.router.add_post("/add-checkpoint", handler)
    server = await aiohttp_server(app)
    log = FakeLog(_keys(ORIGIN_A), 3)
    endpoint = parse_witness(f"http://127.0.0.1:{server.port}={signer.vkey()}")
    submitter = Submitter(log, [endpoint], tmp_path)
    async with aiohttp.ClientSession() as session:
        with pytest.raises(WitnessError, match=error):
            await submitter.submit_once(session, endpoint)
    assert len(parse_note(log.stored[3])[1]) == 2


async def test_a_full_state_disk_is_503_and_cosigns_nothing(client, witness, monkeypatch):
    """The state cannot be written (full disk or map): the witness answers 503 and returns no
    cosignature, since it "MUST persist the new checkpoint before responding"."""
    from saihm.storage import StorageFull

    def full(*args, **kwargs):
        raise StorageFull("the LMDB map is full")

    monkeypatch.setattr(witness.state, "advance", full)
    log = FakeLog(_keys(ORIGIN_A), 4)
    status, _, body = await _post(client, add_checkpoint_body(0, [], log.note()))
    assert (status, body) == (503, b'{"error": "witness_storage_unavailable"}')
