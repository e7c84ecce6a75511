"""What a witness keeps as evidence of log misbehaviour, and what it refuses to keep: only a
genuine conflict with a checkpoint the log validly signed, once per checkpoint, within a
bound in bytes; malformed requests leave nothing behind; incident lines are rate-limited
(saihm/services/witness.py, saihm/witness/state.py)."""

from __future__ import annotations

import base64
import multiprocessing
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saihm.services.witness import IncidentLog, Refused, Witness, create_witness_app
from saihm.translog.checkpoint import verifier_from_key
from saihm.translog.note import open_note
from saihm.translog.witness import CosignatureV1Signer, add_checkpoint_body, parse_add_checkpoint
from saihm.witness.state import WitnessState
from tests.witness.fakelog import FakeLog, log_keys

ORIGIN = "a.example/log"
SIGNER = CosignatureV1Signer("witness.example/w", Ed25519PrivateKey.generate())


@pytest.fixture
def witness(tmp_path: Path):
    state = WitnessState(tmp_path / "w")
    yield Witness(state, SIGNER, log_keys(ORIGIN).verifier_keys())
    state.close()


@pytest.fixture
async def client(aiohttp_client, witness):
    return await aiohttp_client(create_witness_app(witness))


async def _post(client, body: bytes) -> tuple[int, bytes]:
    async with client.post("/add-checkpoint", data=body) as resp:
        return resp.status, await resp.read()


def _padding(lines: int, tag: int = 0) -> bytes:
    """Signature lines of unknown keys, each padded to 2 KB of base64: the spec says the
    witness "MUST ignore signatures from unknown keys", so they may ride along, but must
    never be stored."""
    return b"".join(
        f"\u2014 pad{tag}.example/{i} ".encode() + base64.b64encode(bytes([i]) * 1500) + b"\n"
        for i in range(lines)
    )


def _incidents(err: str) -> list[str]:
    """The witness's own stderr lines (each starts "saihm witness:"), not the access log nor
    what other tests' logging handlers left behind (a handler on a stream closed since writes
    "--- Logging error ---" here)."""
    return [line for line in err.splitlines() if line.startswith("saihm witness:")]


# -- malformed requests: refused, nothing stored, nothing logged -------------------------------


async def test_a_junk_proof_for_the_public_checkpoint_is_422_and_stores_nothing(
    client, witness, capsys
) -> None:
    """The reproduction of issue 21 item 3: anyone can take the log's public checkpoint, give
    the witness's own size as old size and a junk proof line (and pad the note with unknown
    signature lines): 422, and before the fix each such request was kept as ~60 KB of
    "evidence" and logged as an incident."""
    log = FakeLog(log_keys(ORIGIN), 10)
    assert (await _post(client, add_checkpoint_body(0, [], log.note())))[0] == 200
    capsys.readouterr()
    note = log.note() + _padding(25)
    for _ in range(100):
        body = add_checkpoint_body(10, [os.urandom(32)], note)
        assert len(body) > 50_000
        assert (await _post(client, body))[0] == 422
    assert witness.state.evidence() == []
    assert witness.state.evidence_usage().bytes == 0
    assert _incidents(capsys.readouterr().err) == []


def test_a_proof_from_size_zero_is_422_and_stores_nothing(witness) -> None:
    """tlog-witness: "The proof MUST be empty if the old size is zero": a proof there is
    malformed, whatever it holds."""
    log = FakeLog(log_keys(ORIGIN), 8)
    with pytest.raises(Refused) as refused:
        witness.add_checkpoint(add_checkpoint_body(0, [bytes(32)], log.note()))
    assert refused.value.status == 422
    assert witness.state.evidence() == [] and witness.state.head(ORIGIN) is None


@pytest.mark.parametrize("case", ["proof_too_short", "proof_too_long", "bad_base64", "short_hash"])
async def test_a_malformed_request_with_a_valid_log_signature_stores_nothing(
    client, witness, capsys, case
) -> None:
    """A proof of the wrong length for the two sizes (a malformed proof, not a fork), a proof
    line that is not base64 or not a 32-byte hash: refused, with the log's valid signature on
    the checkpoint, and nothing kept or logged."""
    keys = log_keys(ORIGIN)
    honest = FakeLog(keys, 8)
    assert (await _post(client, add_checkpoint_body(0, [], honest.note())))[0] == 200
    honest.grow(8)
    proof = honest.proof(8)
    capsys.readouterr()
    if case == "proof_too_short":
        body = add_checkpoint_body(8, proof[:-1], honest.note())
    elif case == "proof_too_long":
        body = add_checkpoint_body(8, [*proof, os.urandom(32)], honest.note())
    else:
        good = add_checkpoint_body(8, proof, honest.note())
        line = base64.b64encode(proof[0])
        bad = b"!!!!" + line[4:] if case == "bad_base64" else base64.b64encode(proof[0][:31])
        body = good.replace(line, bad, 1)
    status, _ = await _post(client, body)
    assert status == (422 if case.startswith("proof") else 400)
    assert witness.state.evidence() == []
    assert witness.state.head(ORIGIN).size == 8
    assert _incidents(capsys.readouterr().err) == []


# -- genuine conflicts: kept once, the log's lines only ----------------------------------------


async def test_a_fork_at_the_same_size_is_kept_once_however_often_it_is_posted(
    client, witness, capsys
) -> None:
    """Same size, another root, signed by the log: 409 every time, one evidence record holding
    the request with the log's own signature lines only (the padding is not kept), one
    incident line."""
    keys = log_keys(ORIGIN)
    honest, forked = FakeLog(keys, 8), FakeLog(keys, 8, tag=b"fork")
    assert (await _post(client, add_checkpoint_body(0, [], honest.note())))[0] == 200
    capsys.readouterr()
    for i in range(20):
        note = forked.note() + _padding(i % 5, tag=i)
        assert await _post(client, add_checkpoint_body(8, [], note)) == (409, b"8\n")
    (record,) = witness.state.evidence()
    assert record == add_checkpoint_body(8, [], forked.note())
    request = parse_add_checkpoint(record)
    _, signed = open_note(request.note, [verifier_from_key(k) for k in keys.verifier_keys()])
    assert len(signed) == 2  # the log's Ed25519 and ML-DSA-44 lines, and nothing else
    (line,) = _incidents(capsys.readouterr().err)
    assert "INCIDENT" in line and "root_mismatch" in line and "kept as evidence" in line


async def test_a_well_formed_proof_that_does_not_verify_is_kept_once(client, witness) -> None:
    """A proof of the right length between the witness's size and a larger one that does not
    join the two roots (a fork beyond the witness's size): 422, kept once per checkpoint."""
    keys = log_keys(ORIGIN)
    honest = FakeLog(keys, 8)
    assert (await _post(client, add_checkpoint_body(0, [], honest.note())))[0] == 200
    forked = FakeLog(keys, 8, tag=b"fork")
    forked.grow(8)
    proof = forked.proof(8)
    assert (await _post(client, add_checkpoint_body(8, proof, forked.note())))[0] == 422
    other = [os.urandom(32) for _ in proof]
    assert (await _post(client, add_checkpoint_body(8, other, forked.note())))[0] == 422
    assert witness.state.evidence() == [add_checkpoint_body(8, proof, forked.note())]


async def test_cosigning_a_checkpoint_deletes_its_record_the_proof_was_wrong_not_the_log(
    client, witness
) -> None:
    """A well-formed junk proof for the log's real next checkpoint is kept (the witness cannot
    tell it from a fork yet); when the log then submits that checkpoint with the right proof,
    the witness cosigns it, which shows the record was no fork, and deletes it."""
    log = FakeLog(log_keys(ORIGIN), 8)
    assert (await _post(client, add_checkpoint_body(0, [], log.note())))[0] == 200
    log.grow(8)
    junk = [os.urandom(32) for _ in log.proof(8)]
    assert (await _post(client, add_checkpoint_body(8, junk, log.note())))[0] == 422
    assert len(witness.state.evidence()) == 1
    assert (await _post(client, add_checkpoint_body(8, log.proof(8), log.note())))[0] == 200
    assert witness.state.evidence() == []
    assert witness.state.evidence_usage().bytes == 0


# -- the bound ---------------------------------------------------------------------------------


def _fork(witness: Witness, i: int) -> None:
    """Post the i-th fork of size 8 (another root each time) to a witness holding size 8."""
    forked = FakeLog(log_keys(ORIGIN), 8, tag=b"fork%d" % i)
    with pytest.raises(Refused) as refused:
        witness.add_checkpoint(add_checkpoint_body(8, [], forked.note()))
    assert refused.value.code == "root_mismatch"


def test_the_evidence_store_is_bounded_in_bytes_and_says_what_it_did_not_keep(tmp_path) -> None:
    """Distinct genuine forks past the byte bound: the bytes stay under it, the records kept
    are the first ones (never evicted for newer ones), each one not kept is counted and
    reported on an incident line, and the incident lines are rate-limited."""
    lines: list[str] = []
    now = [0.0]
    state = WitnessState(tmp_path / "w", max_evidence_bytes=20_000)
    try:
        incidents = IncidentLog(burst=3, window=60, clock=lambda: now[0], write=lines.append)
        witness = Witness(state, SIGNER, log_keys(ORIGIN).verifier_keys(), incidents=incidents)
        witness.add_checkpoint(add_checkpoint_body(0, [], FakeLog(log_keys(ORIGIN), 8).note()))
        _fork(witness, 0)
        first = state.evidence()
        record = len(first[0])
        for i in range(1, 30):
            _fork(witness, i)
        usage = state.evidence_usage()
        kept = 20_000 // (8 + record)
        assert (usage.records, usage.dropped) == (kept, 30 - kept)
        assert usage.bytes == kept * (8 + record) <= 20_000
        assert state.evidence()[0] == first[0]
        assert len(lines) == 3 and incidents.suppressed == 27
        now[0] = 60.0
        _fork(witness, 30)
        assert "NOT kept, the evidence store is full" in lines[-1]
        assert f"{31 - kept} not kept so far" in lines[-1]
        assert lines[-1].endswith("(27 similar lines suppressed before this one)")
        usage = state.evidence_usage()
    finally:
        state.close()
    again = WitnessState(tmp_path / "w", max_evidence_bytes=20_000)
    try:
        assert again.evidence_usage() == usage  # the counts are on disk
    finally:
        again.close()


def test_incident_lines_are_rate_limited_and_say_how_many_were_left_out() -> None:
    now = [0.0]
    lines: list[str] = []
    log = IncidentLog(burst=3, window=60, clock=lambda: now[0], write=lines.append)
    printed = [log(f"line {i}") for i in range(10)]
    assert printed == [True] * 3 + [False] * 7 and lines == ["line 0", "line 1", "line 2"]
    now[0] = 60.0
    assert log("line 10")
    assert lines[-1] == "line 10 (7 similar lines suppressed before this one)"
    assert log("line 11") and lines[-1] == "line 11"


#: Room for ten fork records (3,451 bytes each with the key).
BOUND = 10 * 3451 + 100


def _record_forks(state_dir: str, tags: list[int], start, out) -> None:
    state = WitnessState(state_dir, max_evidence_bytes=BOUND)
    witness = Witness(
        state, SIGNER, log_keys(ORIGIN).verifier_keys(), incidents=IncidentLog(burst=0)
    )
    start.wait()
    try:
        for i in tags:
            _fork(witness, i)
        out.put("done")
    finally:
        state.close()


def test_two_witness_processes_keep_each_fork_once_within_the_bound(tmp_path) -> None:
    """Two processes on one state directory post overlapping forks at once: each checkpoint
    is kept at most once, the byte count matches the records, and the bound holds."""
    state = WitnessState(tmp_path / "w", max_evidence_bytes=BOUND)
    try:
        Witness(state, SIGNER, log_keys(ORIGIN).verifier_keys()).add_checkpoint(
            add_checkpoint_body(0, [], FakeLog(log_keys(ORIGIN), 8).note())
        )
    finally:
        state.close()
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_record_forks, args=(str(tmp_path / "w"), tags, start, out))
        for tags in (list(range(0, 12)), list(range(6, 18)))
    ]
    for p in procs:
        p.start()
    start.set()
    assert [out.get(timeout=120) for _ in procs] == ["done", "done"]
    for p in procs:
        p.join(timeout=60)
    state = WitnessState(tmp_path / "w", max_evidence_bytes=BOUND)
    try:
        records = state.evidence()
        usage = state.evidence_usage()
        notes = [parse_add_checkpoint(r).note for r in records]
        assert len(set(notes)) == len(notes)  # no checkpoint twice
        assert usage.bytes == sum(8 + len(r) for r in records) <= BOUND
        assert usage.records + usage.dropped >= 18  # every distinct fork: kept or counted
        assert usage.records == BOUND // (8 + len(records[0]))
    finally:
        state.close()
