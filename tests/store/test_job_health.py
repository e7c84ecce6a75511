"""Failure paths (issue 11, Build 4): work after a commit never turns a committed change into an
error; background jobs survive every exception, back off and record their last success.

saihm-protocol "Order of effect and receipt": once the receipt is written the operation has
happened, so the caller is answered with its result, whatever fails afterwards.
"""

from __future__ import annotations

import errno
import itertools
import time

import pytest

from saihm.config import Config
from saihm.store import Store

WAIT = 30.0


def _poll(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def test_a_failing_checkpoint_after_the_commit_still_answers_success(world, monkeypatch):
    alice = world.holder()
    size = world.store.size()

    def broken_signer(*args: object, **kwargs: object) -> bytes:
        raise RuntimeError("signer down")

    monkeypatch.setattr(world.store.log_keys, "sign", broken_signer)
    world.store.public_log.last_signed = 0.0  # make the batch's checkpoint due
    cell = world.call(alice, "saihm_remember", content="committed before the checkpoint")
    assert cell["cellId"]
    assert world.store.size() == size + 1
    health = world.store.job_health()["checkpoint"]
    assert health["last_error"] == "RuntimeError" and health["consecutive_failures"] == 1
    monkeypatch.undo()
    recalled = world.call(alice, "saihm_recall")
    assert [c["plaintext"] for c in recalled] == ["committed before the checkpoint"]


def test_a_failing_post_commit_hook_still_answers_success(world, monkeypatch):
    alice = world.holder()

    def hook(step: str) -> None:
        if step == "after_commit":
            raise OSError(errno.EIO, "hook failed")

    monkeypatch.setattr(world.store.env, "fault_hook", hook)
    assert world.call(alice, "saihm_remember", content="kept")["cellId"]
    monkeypatch.undo()
    assert [c["plaintext"] for c in world.call(alice, "saihm_recall")] == ["kept"]


def test_a_damaged_statistics_counter_does_not_refuse_writes(world):
    from saihm.projections import u64
    from saihm.store import STATS

    alice = world.holder()
    day = u64(int(world.clock()) // 86_400)
    with world.store.storage.write() as txn:
        txn.put(day, b"\xff not cbor", db=world.store.env.db[STATS])
    assert world.call(alice, "saihm_remember", content="counted afresh")["cellId"]
    assert world.store.stats_since(int(world.clock()))[0] == 1


def test_closing_with_a_failing_final_checkpoint_raises_nothing(world, monkeypatch):
    alice = world.holder()
    world.call(alice, "saihm_remember", content="x")

    def broken(*args: object, **kwargs: object) -> bytes:
        raise OSError(errno.ENOSPC, "full")

    monkeypatch.setattr(world.store, "checkpoint_now", broken)
    world.reopen()  # closes the old store: the failure is logged, not raised
    assert [c["plaintext"] for c in world.call(alice, "saihm_recall")] == ["x"]


@pytest.fixture
def looping(tmp_path, request):
    """A store with its background loop running fast, and a clock that says the KEK is due."""
    from saihm.compose import initialise

    config = Config.for_data(tmp_path / "data", checkpoint_interval=0.02, kek_rotation_hours=1)
    initialise(config)
    now = {"t": time.time() + 2 * 3600}
    store = Store(config, clock=lambda: now["t"])
    store.start_jobs()
    yield store, now
    store.close()


def test_the_kek_schedule_survives_enospc_records_it_and_succeeds_next_tick(looping, monkeypatch):
    store, _now = looping
    kek_dir = store.kek_dir
    first = kek_dir.current_version
    real_write = kek_dir._write_file
    calls = {"n": 0}

    def full_once(name: str, data: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(name, data)

    monkeypatch.setattr(kek_dir, "_write_file", full_once)
    _poll(lambda: kek_dir.current_version > first, "the rotation succeeded after ENOSPC")
    _poll(lambda: store.job_health()["kek_rotation"]["last_success"] is not None, "success")
    health = store.job_health()["kek_rotation"]
    assert health["last_error"] == "ENOSPC" and health["last_failure"] is not None
    assert health["consecutive_failures"] == 0
    assert kek_dir.live_versions() == [kek_dir.current_version]
    # The checkpoint job kept running through the KEK failure.
    assert store.job_health()["checkpoint"]["last_success"] is not None


def test_the_checkpoint_loop_survives_any_exception_and_backs_off(looping, monkeypatch):
    store, _now = looping
    real = store.checkpoint_now
    attempts: list[float] = []

    def flaky() -> bytes:
        attempts.append(time.monotonic())
        if len(attempts) <= 3:
            raise ValueError("not an lmdb or saihm error")
        return real()

    monkeypatch.setattr(store, "checkpoint_now", flaky)
    _poll(lambda: len(attempts) > 3, "a fourth attempt")
    _poll(lambda: store.job_health()["checkpoint"]["consecutive_failures"] == 0, "recovery")
    health = store.job_health()["checkpoint"]
    assert health["last_error"] == "ValueError" and health["last_success"] is not None
    # Exponential backoff: after the k-th failure in a row the next try waits interval * 2^k.
    gaps = [b - a for a, b in itertools.pairwise(attempts[:4])]
    assert all(gap >= 0.02 * 2 ** (k + 1) for k, gap in enumerate(gaps)), gaps
    assert store.background is not None and store.background.alive()


def test_the_schedule_reads_the_store_clock(world):
    """rotate_kek_if_due without ``now`` uses the store's clock, not the wall clock."""
    kek_dir = world.store.kek_dir
    first = kek_dir.current_version
    issued = kek_dir.issued_at(first)
    world.clock.now = issued + 23 * 3600
    assert world.store.rotate_kek_if_due() is None
    world.clock.now = issued + 24 * 3600
    assert world.store.rotate_kek_if_due() == first + 1
    assert kek_dir.issued_at(first + 1) == world.clock.now  # recorded on the same clock
    world.clock.now += 3600
    assert world.store.rotate_kek_if_due() is None


def test_a_rotation_kept_from_retiring_by_a_damaged_key_is_not_retried_every_tick(world):
    """A damaged stored key keeps its generation live; the schedule records keyring_error and
    waits for the next period instead of issuing a generation on every tick."""
    import struct

    from saihm.keyring import wrap

    store, kek_dir = world.store, world.store.kek_dir
    alice = world.holder()
    world.call(alice, "saihm_remember", content="fine")
    damaged = bytearray(struct.pack(">I", 1) + wrap(kek_dir.kek(1), b"k" * 32))
    damaged[-1] ^= 1
    deks = store.storage.namespace(b"deks")
    with store.storage.write() as txn:
        txn.put(b"d" * 32, bytes(damaged), db=deks)
    world.clock.now = kek_dir.issued_at(1) + 25 * 3600
    assert not store.jobs.run("kek_rotation", store.rotate_kek_if_due, 0.0)
    assert store.job_health()["kek_rotation"]["last_error"] == "keyring_error"
    assert kek_dir.live_versions() == [1, 2]
    _poll(lambda: store.jobs.due("kek_rotation"), "the backoff to pass")
    assert store.jobs.run("kek_rotation", store.rotate_kek_if_due, 0.0)  # nothing due
    assert kek_dir.current_version == 2
    assert [c["plaintext"] for c in world.call(alice, "saihm_recall")] == ["fine"]
