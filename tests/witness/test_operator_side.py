"""The operator's side of witnessing, in process: cosignatures stored with the checkpoint and
served at ``GET /log/checkpoint``, ``?witnessed=1``, the serve option's validation, and the
one-submitter lock shared by processes on one data directory."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saihm.compose import open_operator
from saihm.config import Config
from saihm.errors import NotFound
from saihm.http.app import create_app
from saihm.translog import verify_checkpoint
from saihm.translog.note import NoteError, parse_note
from saihm.translog.witness import CosignatureV1Signer, verify_cosignatures
from saihm.witness.submit import Submitter, parse_witness

SAIHM = str(Path(sys.executable).parent / "saihm")
W = CosignatureV1Signer("w.example/one", Ed25519PrivateKey.generate())


@pytest.fixture
def operator(tmp_path):
    operator = open_operator(Config.for_data(tmp_path / "d", origin="op.example/log"))
    yield operator
    operator.store.close()


def _cosign(operator) -> bytes:
    store = operator.store
    note = store.checkpoint_now()
    body = note[: note.rindex(b"\n\n") + 1]
    size = int(body.split(b"\n")[1])
    return store.add_cosignatures(size, [W.cosign(body)])


async def test_the_checkpoint_is_served_with_its_cosignatures(aiohttp_client, operator) -> None:
    operator.admin.create_holder()
    merged = _cosign(operator)
    client = await aiohttp_client(create_app(operator))
    async with client.get("/log/checkpoint") as resp:
        assert resp.status == 200
        served = await resp.read()
    assert served == merged
    keys = operator.store.log_keys.verifier_keys()
    assert verify_checkpoint(served, keys, "op.example/log").size == operator.store.size()
    assert verify_cosignatures(served, [W.vkey()], 1) == [W.name]
    # Go's sumdb/note rules open what is served with the log's Ed25519 key alone.
    from tests.translog.test_witness import go_open

    assert go_open(served, [keys[0]]) == served[: served.rindex(b"\n\n") + 1]


async def test_witnessed_asks_for_the_newest_cosigned_checkpoint(aiohttp_client, operator) -> None:
    client = await aiohttp_client(create_app(operator))
    async with client.get("/log/checkpoint?witnessed=1") as resp:
        assert (resp.status, await resp.json()) == (404, {"error": "not_found"})
    operator.admin.create_holder()
    cosigned = _cosign(operator)
    operator.admin.create_holder()  # a newer checkpoint, not cosigned yet
    async with client.get("/log/checkpoint") as resp:
        newest = await resp.read()
    assert len(parse_note(newest)[1]) == 2
    async with client.get("/log/checkpoint?witnessed=1") as resp:
        assert resp.status == 200 and await resp.read() == cosigned
    for query in ("witnessed=0", "witnessed=yes", "witnessed=1&witnessed=1", "witnessed="):
        async with client.get(f"/log/checkpoint?{query}") as resp:
            assert (resp.status, await resp.json()) == (400, {"error": "bad_request"})
    async with client.get("/log/checkpoint?size=3") as resp:  # other parameters: ignored
        assert resp.status == 200 and await resp.read() == newest


def test_add_cosignatures_needs_a_stored_checkpoint_and_well_formed_lines(operator) -> None:
    with pytest.raises(NotFound):
        operator.store.add_cosignatures(10**6, [])
    size = int(operator.store.checkpoint_now().split(b"\n")[1])
    before = operator.store.latest_checkpoint()
    with pytest.raises(NoteError):
        operator.store.add_cosignatures(size, [b"\xe2\x80\x94 w.example/x !!!\n"])
    assert operator.store.latest_checkpoint() == before  # nothing changed


def test_serve_refuses_a_bad_witness_option_in_one_line(tmp_path) -> None:
    good = f"http://127.0.0.1:1={W.vkey()}"
    for specs in (
        ["nothing"],
        [f"ftp://w.example={W.vkey()}"],
        ["http://127.0.0.1:1=bad+key+x"],
        [good, good.replace(":1=", ":2=")],  # one witness named twice
    ):
        options = [a for spec in specs for a in ("--witness", spec)]
        done = subprocess.run(
            [SAIHM, "serve", "--data", str(tmp_path / "d"), "--port", "0", *options],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "witness" in done.stderr.lower()
        assert not (tmp_path / "d").exists()


_HOLD = """
import sys, time
from pathlib import Path
from saihm.witness.submit import Submitter
s = Submitter(None, [], Path(sys.argv[1]))
print("locked" if s._try_lock() else "busy", flush=True)
sys.stdin.readline()
"""


def test_one_submitter_per_data_directory_across_processes(tmp_path) -> None:
    """Workers of one data directory share ``witness-submit.lock``: while one process holds
    it, another cannot submit; when the holder exits, the next one takes over."""
    first = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout.readline().strip() == "locked"
        second = subprocess.run(
            [sys.executable, "-c", _HOLD, str(tmp_path)],
            input="\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.stdout.strip() == "busy"
        here = Submitter(None, [parse_witness(f"http://127.0.0.1:1={W.vkey()}")], tmp_path)
        assert here._try_lock() is False
    finally:
        first.communicate("\n", timeout=60)
    assert here._try_lock() is True


async def test_a_hanging_witness_never_blocks_writes_or_checkpoints(
    aiohttp_client, aiohttp_server, tmp_path
) -> None:
    """A witness that accepts the request and never answers: the operator keeps writing and
    serving new checkpoints, the submitter has tried and not succeeded, and shutting the app
    down does not wait for the witness."""
    import asyncio

    from aiohttp import web

    from saihm.http.log_api import SUBMITTER
    from saihm.witness.submit import for_config

    arrived = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        arrived.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    witness_app = web.Application()
    witness_app.router.add_post("/add-checkpoint", hang)
    witness = await aiohttp_server(witness_app)
    spec = f"http://127.0.0.1:{witness.port}={W.vkey()}"
    operator = open_operator(Config.for_data(tmp_path / "d", witnesses=(spec,)))
    try:
        app = create_app(operator, submitter=for_config(operator.store, operator.config))
        client = await aiohttp_client(app)
        await asyncio.wait_for(arrived.wait(), 30)  # the submitter is now stuck on the witness
        sizes = []
        for _ in range(3):
            await asyncio.to_thread(operator.admin.create_holder)
            async with client.get("/log/checkpoint") as resp:
                assert resp.status == 200
                sizes.append(int((await resp.read()).split(b"\n")[1]))
        assert sizes == sorted(set(sizes)) and len(sizes) == 3
        status = app[SUBMITTER].status[W.name]
        assert status.last_attempt is not None and status.last_success is None
        await client.close()
    finally:
        operator.store.close()


async def test_the_witnessed_monitor_is_stale_only_when_cosigning_stops(operator, tmp_path):
    """With --witness the monitor follows the newest witnessed checkpoint, which trails a busy
    log: entries beyond it are expected while it advances, and stale once it stops."""
    import asyncio

    from aiohttp.test_utils import TestServer

    from saihm.audit.monitor import check_once

    server = TestServer(create_app(operator), host="127.0.0.1")
    await server.start_server()
    url = str(server.make_url("")).rstrip("/")
    state, keys = tmp_path / "monitor", [W.vkey()]
    t0 = time.time()
    try:

        async def round_at(now: float):
            return await asyncio.to_thread(
                check_once, url, state, witnesses=keys, min_witnesses=1, now=now, max_stale=300
            )

        for step in range(3):  # cosigned, then the log moves on beyond the cosigned head
            await asyncio.to_thread(operator.admin.create_holder)
            _cosign(operator)
            await asyncio.to_thread(operator.admin.create_holder)
            operator.store.checkpoint_now()
            result = await round_at(t0 + 1_000 * step)
            assert result.ok, result.alarms
        stuck = await round_at(t0 + 2_100)  # no new cosignature since the last round
        assert stuck.ok
        later = await round_at(t0 + 2_400)
        assert any(str(a).startswith("stale") for a in later.alarms), later.alarms
    finally:
        await server.close()


def _cosigned_bundle(tmp_path) -> Path:
    """An audit bundle whose checkpoint carries W's (Ed25519) cosignature."""
    from tests.support.cli import run_command

    data = tmp_path / "d"
    operator = open_operator(Config.for_data(data, origin="op.example/log"), checkpointer=False)
    try:
        operator.admin.create_holder()
        _cosign(operator)
    finally:
        operator.store.close()
    bundle = tmp_path / "audit.saihm"
    assert run_command("export", ["--data", str(data), "--out", str(bundle)]) == 0
    return bundle


def test_an_audit_bundle_carries_the_cosignatures_and_verify_counts_them(tmp_path, capsys):
    """Cosignatures are stored with the checkpoint, so ``saihm export`` carries them and
    ``saihm verify BUNDLE --witness`` counts them (docs/formats.md §2)."""
    from tests.support.cli import run_command

    bundle = _cosigned_bundle(tmp_path)
    capsys.readouterr()
    assert run_command("verify", [str(bundle), "--no-progress", "--witness", W.vkey()]) == 0
    assert "cosigned by w.example/one (1 required)" in capsys.readouterr().out
    other = CosignatureV1Signer("w.example/two", Ed25519PrivateKey.generate()).vkey()
    argv = [str(bundle), "--no-progress", "--witness", W.vkey(), "--witness", other]
    assert run_command("verify", [*argv, "--min-witnesses", "2"]) == 1
    assert "[witnesses] 1 of the given witnesses cosigned" in capsys.readouterr().out
    # More than the keys given: a usage error.
    assert run_command("verify", [*argv, "--min-witnesses", "3"]) == 2
    assert "--min-witnesses must be" in capsys.readouterr().err


def test_verify_takes_both_keys_of_a_witness_and_counts_it_once(tmp_path, capsys):
    """``--witness ED25519 --witness MLDSA44`` of one witness: its Ed25519 line satisfies
    ``--min-witnesses 1``, and ``--min-witnesses 2`` is a usage error (one witness), not a
    count that could never be met. Monitor shares the option (saihm/commands/audit.py)."""
    from saihm.translog.witness import SubtreeV1Signer
    from tests.support.cli import run_command

    bundle = _cosigned_bundle(tmp_path)
    capsys.readouterr()
    pq = SubtreeV1Signer(W.name, bytes(32)).vkey()
    argv = [str(bundle), "--no-progress", "--witness", W.vkey(), "--witness", pq]
    assert run_command("verify", argv) == 0
    assert "cosigned by w.example/one (1 required)" in capsys.readouterr().out
    assert run_command("verify", [*argv, "--min-witnesses", "2"]) == 2
    assert "--min-witnesses must be 0..the number of --witness witnesses" in (
        capsys.readouterr().err
    )
    twice = [str(bundle), "--no-progress", "--witness", W.vkey(), "--witness", W.vkey()]
    assert run_command("verify", twice) == 2
    assert "given twice" in capsys.readouterr().err


def test_origin_and_witnesses_come_from_the_environment_and_the_config_file(tmp_path) -> None:
    """--origin and --witness are serve options like any other: SAIHM_ORIGIN, SAIHM_WITNESS
    (a JSON array for several) and the TOML keys ``origin`` and ``witness`` reach Config, and
    a bad witness there is the same one-line refusal as on the command line."""
    import json as _json

    from saihm.commands.main import build_parser, config_from, subparser
    from saihm.commands.settings import SettingsError, parse_with_settings

    serve = subparser(build_parser(), "serve")
    data = str(tmp_path / "d")
    one = f"http://127.0.0.1:7380={W.vkey()}"
    two = f"https://w2.example/a={CosignatureV1Signer.generate('w.example/two').vkey()}"
    env = {"SAIHM_ORIGIN": "env.example/log", "SAIHM_WITNESS": _json.dumps([one, two])}
    config = config_from(parse_with_settings(serve, ["--data", data], env))
    assert (config.origin, config.witnesses) == ("env.example/log", (one, two))
    path = tmp_path / "serve.toml"
    path.write_text(f'origin = "file.example/log"\nwitness = ["{one}"]\n')
    config = config_from(parse_with_settings(serve, ["--data", data, "--config", str(path)], {}))
    assert (config.origin, config.witnesses) == ("file.example/log", (one,))
    with pytest.raises(SettingsError, match=r"\$SAIHM_WITNESS"):
        parse_with_settings(serve, ["--data", data], {"SAIHM_WITNESS": "not-a-witness"})
    assert not (tmp_path / "d").exists()
