"""``saihm monitor`` against the live HTTP app (saihm.http.app.create_app) on 127.0.0.1.

Rollback and fork are produced the way they happen: the operator restores an old backup of its
data directory (rollback), or restores it and writes different receipts up to the same size
(fork) or beyond it (inconsistent). The monitor runs in a thread (it uses blocking urllib).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from saihm.audit.monitor import check_once
from saihm.protocol import call as binding_call
from saihm.translog import LogKeys
from tests.support.cli import run_command

from .conftest import World
from .helpers import serving


def _remember(op, world: World, text: str) -> None:
    binding_call(op, world.token_a1, "saihm_remember", {"content": text})


async def _once(url: str, state: Path, **kw):
    return await asyncio.to_thread(check_once, url, state, **kw)


def _backup(world: World, tmp_path: Path) -> Path:
    target = tmp_path / "backup"
    shutil.copytree(world.data, target)
    return target


def _restore(world: World, backup: Path) -> None:
    shutil.rmtree(world.data)
    shutil.copytree(backup, world.data)


async def _seen_then_restored(world: World, tmp_path: Path, state: Path, text: str) -> None:
    """The monitor (state in ``state``) sees the log once ``text`` is remembered; then the
    operator restores the copy of its data directory taken before that."""
    backup = _backup(world, tmp_path)
    async with serving(world) as (op, url):
        _remember(op, world, text)
        assert (await _once(url, state)).ok
    _restore(world, backup)


async def test_monitor_follows_a_growing_log_verifying_every_entry(world: World, tmp_path) -> None:
    state = tmp_path / "state"
    async with serving(world) as (op, url):
        first = await _once(url, state)
        assert first.ok, first.alarms
        assert first.size == 12 and first.verified == 12
        assert "not pinned" in first.notes[0]
        _remember(op, world, "more")
        second = await _once(url, state)
        assert second.ok, second.alarms
        assert second.size == 13 and second.verified == 1
    assert (state / "checkpoints" / "13.note").exists()
    pinned = (state / ".saihm-mirror" / "keys.txt").read_text().splitlines()
    assert pinned == world.keys_file.read_text().split()


async def test_monitor_detects_rollback(world: World, tmp_path) -> None:
    state = tmp_path / "state"
    # The operator restores an older copy of its data directory.
    await _seen_then_restored(world, tmp_path, state, "after the backup")
    async with serving(world) as (_op, url):
        result = await _once(url, state)
    assert not result.ok
    assert str(result.alarms[0]) == "rollback: checkpoint size 12 < held checkpoint size 13"


async def test_monitor_detects_fork_at_same_size(world: World, tmp_path) -> None:
    state = tmp_path / "state"
    await _seen_then_restored(world, tmp_path, state, "history one")
    async with serving(world) as (op, url):
        _remember(op, world, "history two")  # same size, different leaf
        result = await _once(url, state)
    assert not result.ok
    assert str(result.alarms[0]) == "fork: two different roots signed for size 13"


async def test_monitor_detects_inconsistent_growth(world: World, tmp_path) -> None:
    state = tmp_path / "state"
    await _seen_then_restored(world, tmp_path, state, "history one")
    async with serving(world) as (op, url):
        for text in ("history two", "and more"):
            _remember(op, world, text)
        result = await _once(url, state)
        assert not result.ok and str(result.alarms[0]).startswith("fork: "), result.alarms
        # The forked head is not adopted: the next round alarms again.
        assert not (await _once(url, state)).ok


async def test_monitor_detects_bad_signature(world: World, tmp_path) -> None:
    state = tmp_path / "state"
    async with serving(world) as (op, url):
        assert (await _once(url, state)).ok
    keys_dir = world.data / "log-keys"
    shutil.rmtree(keys_dir)
    LogKeys.generate(world.config.origin).save(keys_dir)  # someone else signs now
    async with serving(world) as (op, url):
        _remember(op, world, "signed by a stranger")
        result = await _once(url, state)
    assert not result.ok and str(result.alarms[0]).startswith("bad signature")


async def test_monitor_pins_trusted_keys_and_cli_exits_nonzero(world: World, tmp_path) -> None:
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("\n".join(LogKeys.generate(world.config.origin).verifier_keys()))
    async with serving(world) as (_op, url):
        args = [url, "--state", str(tmp_path / "s1"), "--once", "--trust", str(foreign)]
        assert await asyncio.to_thread(run_command, "monitor", args) == 1
        args = [url, "--state", str(tmp_path / "s2"), "--once", "--trust", str(world.keys_file)]
        assert await asyncio.to_thread(run_command, "monitor", args) == 0


async def test_monitor_held_checkpoint_catches_truncated_bundle(world: World, tmp_path) -> None:
    state = tmp_path / "state"
    # The bundle is exported from the rolled-back directory.
    await _seen_then_restored(world, tmp_path, state, "later")
    bundle = tmp_path / "b.cbor"
    assert run_command("export", ["--data", str(world.data), "--out", str(bundle)]) == 0
    held = str(state / "checkpoints" / "13.note")
    args = [str(bundle), "--trust", str(world.keys_file), "--checkpoint", held, "--no-progress"]
    assert run_command("verify", args) == 1


async def test_monitor_alarms_when_entries_stay_beyond_the_checkpoint(world: World, tmp_path):
    """A log that keeps handing out receipts but stops signing: "stale" after --max-stale."""
    from .test_mirror import proxy

    frozen: dict[str, bytes] = {}

    def old_checkpoint(at: str, body: bytes, _headers: dict):
        if at == "/log/checkpoint":
            body = frozen.setdefault("note", body)
        return body, {}

    state = tmp_path / "state"
    async with serving(world) as (op, url), proxy(url, old_checkpoint) as stuck:
        first = await _once(stuck, state, now=1000.0)
        assert first.ok and first.size == 12
        _remember(op, world, "beyond the signed size")
        soon = await _once(stuck, state, now=1100.0, max_stale=300)
        later = await _once(stuck, state, now=1500.0, max_stale=300)
    assert soon.ok, soon.alarms
    assert [str(a) for a in later.alarms] == ["stale: entries beyond checkpoint size 12 for 400 s"]
