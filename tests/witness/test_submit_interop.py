"""The operator's submitter against other witnesses' limits and keys: it sends the checkpoint
with the log's own signature lines only (litewitness caps a request at 10 KiB), and a witness
may be configured with both its Ed25519 and its ML-DSA-44 key, as one witness."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saihm.errors import MalformedInput
from saihm.services.witness import Refused, Witness
from saihm.translog.note import parse_note
from saihm.translog.witness import CosignatureV1Signer, SubtreeV1Signer, add_checkpoint_body
from saihm.witness.state import WitnessState
from saihm.witness.submit import Submitter, parse_witness, parse_witnesses
from tests.witness.fakelog import FakeLog, log_keys

ORIGIN = "a.example/log"
NAME = "witness.example/w"
ED25519 = CosignatureV1Signer(NAME, Ed25519PrivateKey.generate())
MLDSA44 = SubtreeV1Signer(NAME, bytes(range(32)))


@pytest.fixture
def witness(tmp_path: Path):
    state = WitnessState(tmp_path / "w")
    yield Witness(state, ED25519, log_keys(ORIGIN).verifier_keys(), mldsa44=MLDSA44)
    state.close()


@pytest.fixture
async def recording(aiohttp_server, witness):
    """A real witness behind a handler that records every request body."""
    bodies: list[bytes] = []

    async def handler(request: web.Request) -> web.Response:
        body = await request.read()
        bodies.append(body)
        try:
            lines = witness.add_checkpoint(body)
        except Refused as refused:
            return refused.response()
        return web.Response(body=lines, content_type="text/plain")

    app = web.Application()
    app.router.add_post("/add-checkpoint", handler)
    server = await aiohttp_server(app)
    return f"http://127.0.0.1:{server.port}", bodies


async def test_the_checkpoint_goes_out_with_the_log_signature_lines_only(
    recording, tmp_path
) -> None:
    """A checkpoint that already carries three ML-DSA-44 cosignatures and an Ed25519 one
    (~10 KB of lines that are none of this witness's business) is submitted as the log signed
    it: a request of ~3.4 KB, under litewitness's 10 KiB, and the stored note keeps every
    line, with this witness's (configured Ed25519) line added."""
    url, bodies = recording
    log = FakeLog(log_keys(ORIGIN), 5)
    signed = log.note()
    text = signed[: signed.rindex(b"\n\n") + 1]
    others = [SubtreeV1Signer(f"other.example/pq{i}", bytes([i]) * 32) for i in range(3)]
    extra = [s.cosign(text) for s in others]
    extra.append(CosignatureV1Signer.generate("other.example/ed").cosign(text))
    log.add_cosignatures(5, extra)
    assert len(log.note()) > 10 * 1024
    endpoint = parse_witness(f"{url}={ED25519.vkey()}")
    submitter = Submitter(log, [endpoint], tmp_path)
    async with aiohttp.ClientSession() as session:
        assert await submitter.submit_once(session, endpoint)
    assert bodies == [add_checkpoint_body(0, [], signed)]
    assert len(bodies[0]) < 10 * 1024
    names = [s.name for s in parse_note(log.note())[1]]
    assert names == [ORIGIN, ORIGIN, *(s.name for s in others), "other.example/ed", NAME]


async def test_a_witness_with_both_keys_is_one_witness_to_the_submitter(
    recording, tmp_path
) -> None:
    """``--witness URL=ED25519 --witness URL=MLDSA44``: one loop and one status for the
    witness, one request per checkpoint, both lines stored; once either line is on the
    checkpoint the witness is not asked again."""
    url, bodies = recording
    log = FakeLog(log_keys(ORIGIN), 5)
    endpoints = parse_witnesses([f"{url}={ED25519.vkey()}", f"{url}={MLDSA44.vkey()}"])
    submitter = Submitter(log, endpoints, tmp_path)
    assert list(submitter.snapshot()) == [NAME]
    async with aiohttp.ClientSession() as session:
        assert await submitter.submit_once(session, endpoints[1])
        assert not await submitter.submit_once(session, endpoints[0])
    assert len(bodies) == 1
    assert [s.name for s in parse_note(log.note())[1]] == [ORIGIN, ORIGIN, NAME, NAME]
    assert submitter.status[NAME].cosigned_size == 5


async def test_a_witness_configured_by_its_ml_dsa_key_keeps_that_line_only(
    recording, tmp_path
) -> None:
    url, _ = recording
    log = FakeLog(log_keys(ORIGIN), 5)
    endpoint = parse_witness(f"{url}={MLDSA44.vkey()}")
    submitter = Submitter(log, [endpoint], tmp_path)
    async with aiohttp.ClientSession() as session:
        assert await submitter.submit_once(session, endpoint)
    (line,) = parse_note(log.note())[1][2:]
    assert (line.name, line.key_id) == (NAME, MLDSA44.key_id)


def test_both_keys_of_one_witness_are_accepted_and_ambiguity_is_refused() -> None:
    url = "https://w.example/w1"
    ed, pq = f"{url}={ED25519.vkey()}", f"{url}={MLDSA44.vkey()}"
    assert [e.vkey for e in parse_witnesses([ed, pq])] == [ED25519.vkey(), MLDSA44.vkey()]
    second_ed = f"{url}={CosignatureV1Signer.generate(NAME).vkey()}"
    for specs, why in (
        ([ed, ed], "given twice"),
        ([ed, second_ed], "two keys of one type"),
        ([ed, pq.replace("/w1=", "/w2=")], "two URLs"),
    ):
        with pytest.raises(MalformedInput, match=why):
            parse_witnesses(specs)


def test_serve_takes_both_keys_of_one_witness(tmp_path) -> None:
    """``saihm serve --witness`` (here through SAIHM_WITNESS) accepts a witness's two keys."""
    import json

    from saihm.commands.main import build_parser, config_from, subparser
    from saihm.commands.settings import parse_with_settings

    serve = subparser(build_parser(), "serve")
    specs = [f"https://w.example={ED25519.vkey()}", f"https://w.example={MLDSA44.vkey()}"]
    env = {"SAIHM_WITNESS": json.dumps(specs)}
    config = config_from(parse_with_settings(serve, ["--data", str(tmp_path / "d")], env))
    assert config.witnesses == tuple(specs)
