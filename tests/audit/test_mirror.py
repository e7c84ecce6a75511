"""``saihm mirror``, ``saihm verify DIR|URL`` and ``saihm publish``: a stranger's copy of the log.

The log is the audit template (conftest.py) grown past two full tiles, served by the real app
(saihm.http.app.create_app) on 127.0.0.1; the mirror uses blocking urllib, so it runs in a
thread (or a child process) while the server answers. Rollback and fork are made the way they
happen: the operator restores an old copy of its data directory, or a proxy between the mirror
and the log rewrites what the log serves.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from saihm.audit.fetch import HttpSource
from saihm.audit.mirror import mirror, verify_log
from saihm.audit.publish import tile_paths
from saihm.protocol import call as binding_call
from saihm.translog.tiles import decode_entry_bundle, tile_path
from tests.support.cli import run_command

from .conftest import GROWN, World
from .helpers import serving

ROOT = Path(__file__).resolve().parents[2]


def tree_files(directory: Path) -> dict[str, bytes]:
    """Every file of a tiled directory but the mirror's private state."""
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and ".saihm-mirror" not in p.parts
    }


def remember(op, world: World, n: int, text: str = "more") -> None:
    for i in range(n):
        binding_call(op, world.token_a1, "saihm_remember", {"content": f"{text} {i}"})
    op.store.checkpoint_now()


# -- a live server ------------------------------------------------------------------------------


async def test_mirror_of_a_live_server_holds_the_log_and_verifies(big: World, tmp_path) -> None:
    target = tmp_path / "m"
    async with serving(big) as (op, url):
        outcome = await asyncio.to_thread(mirror, url, target)
        assert outcome.ok, (outcome.alarms, outcome.report.failures)
        size = op.store.size()
        assert outcome.size == size == 12 + GROWN and outcome.new_entries == size
        assert outcome.report.signatures == size and not outcome.report.keys_pinned
        # Every tile and bundle of the tree, byte-exact, in the tlog-tiles layout.
        for path in tile_paths(size):
            served = op.store.entry_bundle if path.startswith("tile/entries") else None
            assert (target / path).is_file(), path
            if served is None:
                continue
        assert (target / "checkpoint").read_bytes() == op.store.latest_checkpoint()
        assert (target / "tile/entries/000").read_bytes() == op.store.entry_bundle(0, None)
        assert (target / "tile/0/002.p/100").read_bytes() == op.store.tile(0, 2, 100)
        url_report = await asyncio.to_thread(verify_log, url)
    assert url_report.ok and url_report.report.receipts == size
    dir_report = verify_log(str(target))
    assert dir_report.ok and dir_report.report.receipts == size
    assert dir_report.report.erasures == 1  # gamma, rebuilt from its FORGET receipt
    assert run_command("verify", [str(target), "--no-progress"]) == 0


async def test_incremental_mirror_fetches_only_what_is_new(big: World, tmp_path) -> None:
    target, fresh = tmp_path / "m", tmp_path / "fresh"
    async with serving(big) as (op, url):
        assert (await asyncio.to_thread(mirror, url, target)).ok
        before = {p: (target / p).stat().st_mtime_ns for p in tree_files(target)}
        remember(op, big, 200)
        second = await asyncio.to_thread(mirror, url, target)
        assert second.ok, (second.alarms, second.report.failures)
        assert second.new_entries == 200 and second.size == 812
        assert (await asyncio.to_thread(mirror, url, fresh)).ok
    # The same tree as a mirror made in one go (old partial tiles pruned but the previous
    # checkpoint's, which clients holding it may still ask for), and full tiles untouched.
    grown, once = tree_files(target), tree_files(fresh)
    assert {p: b for p, b in grown.items() if ".p/" not in p or p in once} == {
        p: b for p, b in once.items() if not p.startswith("checkpoints/")
    } | {p: b for p, b in grown.items() if p.startswith("checkpoints/")}
    assert set(grown) - set(once) <= {
        "tile/0/002.p/100",
        "tile/entries/002.p/100",
        "tile/1/000.p/2",
        "checkpoints/612.note",
    }
    assert (target / "tile/entries/000").stat().st_mtime_ns == before["tile/entries/000"]
    assert verify_log(str(target)).ok


async def test_two_mirror_processes_on_one_directory_end_consistent(big: World, tmp_path) -> None:
    """Two runs at once over one DIR: the lock serialises them; both end verified."""
    target = tmp_path / "m"
    async with serving(big) as (_op, url):
        runs = [
            asyncio.create_subprocess_exec(
                str(Path(sys.executable).parent / "saihm"),
                "mirror",
                url,
                str(target),
                "--no-progress",
                "--json",
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        procs = await asyncio.gather(*runs)
        outs = [await asyncio.wait_for(p.communicate(), 120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    news = sorted(json.loads(out)["newEntries"] for out, _ in outs)
    assert news == [0, 12 + GROWN]
    assert verify_log(str(target)).ok


# -- a static publication ----------------------------------------------------------------------


def static_server(directory: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "--directory",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for(url: str, proc: subprocess.Popen) -> None:
    import urllib.request

    for _ in range(600):  # bounded: 30 s at most
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            pass
        try:
            proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            continue
        pytest.fail("the static server exited")
    pytest.fail("the static server did not answer")


async def test_published_directory_behind_a_static_server_mirrors_like_the_live_log(
    big: World, tmp_path
) -> None:
    from tests.support.serve import free_port

    out, live_m, static_m = tmp_path / "pub", tmp_path / "live", tmp_path / "static"
    assert cli_publish(big, out) == 0
    port = free_port()
    proc = static_server(out, port)
    static = f"http://127.0.0.1:{port}"
    try:
        wait_for(static + "/checkpoint", proc)
        async with serving(big) as (_op, url):
            live = await asyncio.to_thread(mirror, url, live_m)
        from_static = await asyncio.to_thread(mirror, static, static_m)
        assert live.ok and from_static.ok, from_static.report.failures
        assert from_static.size == live.size and from_static.root == live.root
        assert tree_files(static_m) == tree_files(live_m)
        reports = [await asyncio.to_thread(verify_log, u) for u in (static, str(static_m))]
        code = await asyncio.to_thread(run_command, "verify", [static, "--no-progress"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert all(r.ok and r.report.receipts == live.size for r in reports)
    assert code == 0
    # The publication holds exactly the tree, the checkpoint and the keys: nothing else.
    # The tlog-tiles tree, the verifier keys and the log explorer beside them (saihm publish).
    from saihm.http.explorer import FILES

    explorer = {f"explorer/{name}" for name in FILES}
    assert set(tree_files(out)) == {*tile_paths(live.size), "checkpoint", "v1/keys", *explorer}


def cli_publish(world: World, out: Path) -> int:
    return run_command("publish", ["--data", str(world.data), "--to", str(out)])


def test_publish_is_incremental_and_never_rewrites_a_full_tile(big: World, tmp_path) -> None:
    out, fresh = tmp_path / "pub", tmp_path / "fresh"
    assert cli_publish(big, out) == 0
    full = {p: (out / p).stat() for p in tile_paths(612) if ".p/" not in p}
    op = big.operator()
    try:
        remember(op, big, 200)
    finally:
        op.store.close()
    assert cli_publish(big, out) == 0
    for path, stat in full.items():
        after = (out / path).stat()
        assert (after.st_ino, after.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns), path
    assert cli_publish(big, fresh) == 0
    now, once = tree_files(out), tree_files(fresh)
    assert {p: b for p, b in now.items() if p in once} == once  # same bytes as one publication
    assert set(now) - set(once) == {"tile/0/002.p/100", "tile/entries/002.p/100", "tile/1/000.p/2"}
    # Nothing new: the same publication, less the partial tiles of two checkpoints ago.
    assert cli_publish(big, out) == 0
    assert tree_files(out) == once


def test_publish_refuses_to_roll_back_or_to_mix_two_logs(big: World, world: World, tmp_path):
    out = tmp_path / "pub"
    assert cli_publish(big, out) == 0
    before = tree_files(out)
    assert cli_publish(world, out) == 1  # the small log: size 12 < 612
    (tmp_path / "other").mkdir()
    assert tree_files(out) == before
    refused = subprocess.run(
        [
            str(Path(sys.executable).parent / "saihm"),
            "publish",
            "--data",
            str(tmp_path / "nope"),
            "--to",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "nope").exists()


# -- alarms: rollback, fork, tampering ----------------------------------------------------------


async def test_mirror_alarms_on_rollback_and_adopts_nothing(big: World, tmp_path) -> None:
    target, backup = tmp_path / "m", tmp_path / "backup"
    shutil.copytree(big.data, backup)
    async with serving(big) as (op, url):
        remember(op, big, 5)
        assert (await asyncio.to_thread(mirror, url, target)).ok
    shutil.rmtree(big.data)
    shutil.copytree(backup, big.data)
    held = tree_files(target)
    async with serving(big) as (_op, url):
        code = await asyncio.to_thread(run_command, "mirror", [url, str(target), "--no-progress"])
        outcome = await asyncio.to_thread(mirror, url, target)
    assert code == 1
    assert [str(a) for a in outcome.alarms] == [
        "rollback: checkpoint size 612 < held checkpoint size 617"
    ]
    assert tree_files(target) == held


async def test_mirror_alarms_on_a_fork_beyond_the_held_size(big: World, tmp_path) -> None:
    target, backup = tmp_path / "m", tmp_path / "backup"
    shutil.copytree(big.data, backup)
    async with serving(big) as (op, url):
        remember(op, big, 1, "history one")
        assert (await asyncio.to_thread(mirror, url, target)).ok
    shutil.rmtree(big.data)
    shutil.copytree(backup, big.data)
    async with serving(big) as (op, url):
        remember(op, big, 3, "history two")  # another leaf 612, then more
        outcome = await asyncio.to_thread(mirror, url, target)
    assert not outcome.ok and str(outcome.alarms[0]).startswith("fork: "), outcome.alarms
    assert (target / "checkpoint").read_bytes().split(b"\n")[1] == b"613"


def _flip_leaf_byte(bundle: bytes, leaf: int, offset: int) -> bytes:
    leaves = decode_entry_bundle(bundle)
    raw = bytearray(leaves[leaf])
    raw[offset] ^= 1
    leaves[leaf] = bytes(raw)
    return b"".join(len(x).to_bytes(2, "big") + x for x in leaves)


@asynccontextmanager
async def proxy(upstream: str, rewrite):
    """A proxy that passes every request to ``upstream`` and lets ``rewrite`` change bodies."""
    import aiohttp

    async def handle(request: web.Request) -> web.Response:
        async with (
            aiohttp.ClientSession() as session,
            session.get(upstream + request.path_qs) as answer,
        ):
            body = await answer.read()
            status = answer.status
        body, headers = rewrite(request.path, body, dict(request.headers))
        return web.Response(body=body, status=status, headers=headers)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


@pytest.mark.parametrize(
    ("path", "offset", "check"),
    [
        ("/log/tile/entries/001", -5, "signature"),  # a signature byte: the id no longer matches
        ("/log/tile/entries/001", 40, "receipt id"),  # inside subjectId
    ],
)
async def test_mirror_fails_on_a_tampered_entry_and_keeps_nothing_of_it(
    big: World, tmp_path, path, offset, check
) -> None:
    target = tmp_path / "m"

    def rewrite(at: str, body: bytes, _headers: dict):
        if at == path:
            body = _flip_leaf_byte(body, 7, offset)
        return body, {}

    async with serving(big) as (_op, url), proxy(url, rewrite) as bad:
        outcome = await asyncio.to_thread(mirror, bad, target)
        report = await asyncio.to_thread(verify_log, bad)
    failures = {f.check for f in outcome.report.failures}
    assert not outcome.ok and failures & {check, "receipt id", "signature", "tiles"}
    assert not (target / "checkpoint").exists() and not (target / "tile/entries/001").exists()
    assert not report.ok and report.report.failures[0].index == 256 + 7


async def test_mirror_fails_on_a_tile_that_does_not_match_the_entries(big: World, tmp_path):
    def rewrite(at: str, body: bytes, _headers: dict):
        if at == "/log/tile/1/000.p/2":
            body = body[:32] + bytes(32)
        return body, {}

    async with serving(big) as (_op, url), proxy(url, rewrite) as bad:
        outcome = await asyncio.to_thread(mirror, bad, tmp_path / "m")
    assert [f.check for f in outcome.report.failures] == ["tiles"]
    assert "tile/1/000.p/2 differs" in outcome.report.failures[0].what


def test_verify_dir_catches_a_raw_edit_of_the_mirror(big: World, tmp_path) -> None:
    """An attacker with write access to a mirror directory edits a bundle and its tile."""

    async def make() -> None:
        async with serving(big) as (_op, url):
            assert (await asyncio.to_thread(mirror, url, tmp_path / "m")).ok

    asyncio.run(make())
    bundle = tmp_path / "m" / "tile/entries/000"
    bundle.write_bytes(_flip_leaf_byte(bundle.read_bytes(), 3, -5))
    report = verify_log(str(tmp_path / "m"))
    assert not report.ok and report.report.failures[0].index == 3
    assert run_command("verify", [str(tmp_path / "m"), "--no-progress"]) == 1


# -- kill -9 and resume ------------------------------------------------------------------------


def _child(url: str, target: Path, stop: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tests.audit._mirror_child", url, str(target), str(stop)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _state_summary(target: Path) -> dict:
    import lmdb

    env = lmdb.open(str(target / ".saihm-mirror" / "lmdb"), max_dbs=8, readonly=True)
    try:
        with env.begin() as txn:
            out = {}
            for name in (b"meta", b"holders", b"receipts", b"erasures"):
                db = env.open_db(name, txn=txn, create=False)
                out[name] = dict(txn.cursor(db=db).iternext())
            return out
    finally:
        env.close()


async def test_kill_9_at_any_step_then_rerun_ends_in_the_same_state(big: World, tmp_path) -> None:
    reference = tmp_path / "reference"
    async with serving(big) as (_op, url):
        done = await asyncio.to_thread(_child, url, reference, 0)
        steps = int(done.stdout)
        assert steps > 10, done
        for stop in sorted({1, 3, steps // 2, steps - 1, steps}):
            target = tmp_path / f"killed-{stop}"
            killed = await asyncio.to_thread(_child, url, target, stop)
            assert killed.returncode == -9, (stop, killed.stderr)
            rerun = await asyncio.to_thread(_child, url, target, 0)
            assert rerun.returncode == 0 and rerun.stdout.strip().isdigit(), rerun
            assert tree_files(target) == tree_files(reference), stop
            mine, theirs = _state_summary(target), _state_summary(reference)
            for name in theirs:
                assert mine[name] == theirs[name], (stop, name, set(mine[name]) ^ set(theirs[name]))


# -- compression ------------------------------------------------------------------------------


async def test_entry_bundles_are_gzip_compressed_when_the_client_accepts_it(big: World) -> None:
    import urllib.request

    def get(url: str, accept: str | None):
        headers = {} if accept is None else {"Accept-Encoding": accept}
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as r:
            return r.headers.get("Content-Encoding"), r.headers.get("Vary"), r.read()

    async with serving(big) as (op, url):
        plain = op.store.entry_bundle(0, None)
        for path in ("/log/tile/entries/000", "/log/tile/entries/002.p/100"):
            coding, vary, body = await asyncio.to_thread(get, url + path, "gzip, identity")
            assert (coding, vary) == ("gzip", "Accept-Encoding")
            assert len(body) < len(gzip.decompress(body))
            if path.endswith("000"):
                assert gzip.decompress(body) == plain
                # The mirror's reader asks for gzip and hands back the bundle itself.
                assert await asyncio.to_thread(HttpSource(url).get, "tile/entries/000") == plain
            for accept in (None, "identity", "gzip;q=0", "br"):
                coding, _, raw = await asyncio.to_thread(get, url + path, accept)
                assert coding is None and raw == gzip.decompress(body)
        # Hash tiles stay as they are (they do not compress).
        coding, _, _ = await asyncio.to_thread(get, url + "/log/tile/0/000", "gzip")
        assert coding is None


async def test_mirror_refuses_a_gzip_bomb(big: World, tmp_path) -> None:
    def rewrite(at: str, body: bytes, _headers: dict):
        if at == "/log/tile/entries/000":
            return gzip.compress(bytes(64 << 20)), {"Content-Encoding": "gzip"}
        return body, {}

    async with serving(big) as (_op, url), proxy(url, rewrite) as bad:
        code = await asyncio.to_thread(
            run_command, "mirror", [bad, str(tmp_path / "m"), "--no-progress"]
        )
    assert code == 2


# -- export streams ----------------------------------------------------------------------------


def test_streamed_export_equals_the_bundle_in_memory(world: World, tmp_path) -> None:
    from saihm.audit.datadir import read_data_dir
    from saihm.audit.export import stream_bundle

    for with_cells in (False, True):
        out = tmp_path / f"b{with_cells}.cbor"
        stream_bundle(world.data, out, with_cells=with_cells)
        assert out.read_bytes() == read_data_dir(world.data, with_cells=with_cells).to_cbor()


def test_export_memory_stays_far_below_the_log_size(world: World, tmp_path) -> None:
    import os
    import tracemalloc

    from saihm.audit.export import stream_bundle
    from saihm.translog import MerkleTree

    # 4,000 leaves of 3.6 kB (the size of a receipt) appended to the data directory's log.
    with MerkleTree(world.lmdb_dir) as tree:
        for _ in range(40):
            tree.append_many([os.urandom(3600) for _ in range(100)])
    out = tmp_path / "b.cbor"
    tracemalloc.start()
    try:
        written = stream_bundle(world.data, out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert written["leaves"] == 4012 and out.stat().st_size > 14_000_000
    assert peak < out.stat().st_size / 20, peak


# -- verify's source dispatch ------------------------------------------------------------------


def test_verify_names_a_data_directory_given_as_a_file_and_refuses_bad_sources(world, tmp_path):
    saihm = str(Path(sys.executable).parent / "saihm")
    for args in ([str(world.data)], ["http://127.0.0.1:9/"], [str(tmp_path / "missing")]):
        done = subprocess.run(
            [saihm, "verify", *args, "--no-progress"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert (
        "--data"
        in subprocess.run([saihm, "verify", str(world.data)], capture_output=True, text=True).stderr
    )


def test_tile_paths_match_the_spec_example() -> None:
    """tlog-tiles: "a tree of size 70,000 will be represented by 273 full level 0 tiles, one
    partial level 0 tile of width 112, one full level 1 tile, one partial level 1 tile of width
    17, and one partial level 2 tile of width 1"."""
    paths = [p for p in tile_paths(70_000) if not p.startswith("tile/entries")]
    assert len([p for p in paths if p.startswith("tile/0/") and ".p/" not in p]) == 273
    assert {p for p in paths if ".p/" in p} == {
        "tile/0/273.p/112",
        "tile/1/001.p/17",
        "tile/2/000.p/1",
    }
    assert tile_path(1, 0) in paths and len(paths) == 273 + 1 + 1 + 1 + 1


async def test_verify_url_checks_the_published_erasure_list(big: World) -> None:
    """saihm-protocol "Erasure": the list must name every cell a FORGET receipt erased."""

    def drop_gamma(at: str, body: bytes, _headers: dict):
        if at == "/log/v1/erasures":
            published = json.loads(body)
            published["cellIds"] = []
            body = json.dumps(published).encode()
        return body, {"Content-Type": "application/json"}

    async with serving(big) as (_op, url), proxy(url, drop_gamma) as bad:
        honest = await asyncio.to_thread(verify_log, url)
        lying = await asyncio.to_thread(verify_log, bad)
    assert honest.ok and honest.report.erasures == 1
    assert not any("erasure list" in n for n in honest.report.notes)
    (failure,) = lying.report.failures
    assert failure.check == "erasures" and big.cells["gamma"].hex() in failure.what


async def test_mirror_checks_every_checkpoint_held_in_dir(big: World, tmp_path) -> None:
    """Each run first recomputes, from DIR's tiles, the root of every checkpoint DIR holds."""
    target = tmp_path / "m"
    async with serving(big) as (op, url):
        for _ in range(3):
            assert (await asyncio.to_thread(mirror, url, target)).ok
            remember(op, big, 40)
        assert len(list((target / "checkpoints").glob("*.note"))) == 3
        (target / "checkpoints" / "652.note").write_bytes(
            (target / "checkpoints" / "612.note").read_bytes().replace(b"\n612\n", b"\n652\n")
        )
        outcome = await asyncio.to_thread(mirror, url, target)
    assert [str(a) for a in outcome.alarms] == [
        f"inconsistent: {target}/checkpoints/652.note does not match the tree verified in "
        f"{target} (edited?)"
    ]


def test_two_publish_processes_at_once_give_one_publication(big: World, tmp_path) -> None:
    """Two publishers over one OUT take turns (a lock on OUT itself): the same files as one."""
    saihm = str(Path(sys.executable).parent / "saihm")
    out, once = tmp_path / "pub", tmp_path / "once"
    args = [saihm, "publish", "--data", str(big.data), "--to", str(out)]
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    written = sorted(json.loads(stdout)["written"] for stdout, _ in results)
    assert written[0] == 0 and written[1] == len(tile_paths(612))
    assert cli_publish(big, once) == 0
    assert tree_files(out) == tree_files(once)
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def test_publish_to_s3_without_boto3_says_which_extra(big: World, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "boto3", None)  # as if saihm[s3] were not installed
    assert run_command("publish", ["--data", str(big.data), "--to", "s3://bucket/log"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "saihm: error: publishing to S3 needs boto3: pip install 'saihm[s3]'"
