"""The rotation's critical section (docs/operations.md "KEK rotation"), within one process.

Issuing, re-wrapping and retiring happen under one lock; a generation is retired only after a
check, under the LMDB write lock, that nothing it wraps remains; a wrap never races with the
retirement of its generation. Cross-process versions: tests/store/test_kek_rotation_safety.py.
"""

from __future__ import annotations

import os
import struct
import threading

import pytest

from saihm.keyring import KekDirectory, Keyring, KeyringError, RotationBusy, new_dek, wrap

WAIT = 30.0  # seconds: the bound on every wait for a condition that must happen


def _fill(env, keyring: Keyring, n: int = 20) -> dict[bytes, bytes]:
    deks = {os.urandom(32): new_dek() for _ in range(n)}
    with env.write() as txn:
        for cell_id, dek in deks.items():
            keyring.put_dek(txn, cell_id, dek)
    return deks


def _all_readable(env, keyring: Keyring, deks: dict[bytes, bytes]) -> bool:
    with env.read() as txn:
        return all(keyring.dek(txn, c) == d for c, d in deks.items())


def test_a_second_rotation_waits_for_one_paused_after_issuing(env, keyring, kek_dir):
    """The interleaving that shredded live generations: rotation A stops right after issuing.
    Rotation B cannot begin (a non-waiting attempt is refused with RotationBusy; a waiting one
    starts only after A has retired), and every key survives both."""
    deks = _fill(env, keyring)
    issued, release = threading.Event(), threading.Event()
    b_locked = threading.Event()
    results: dict[str, int | None] = {}

    def hook_a(step: str) -> None:
        if step == "issued":
            issued.set()
            assert release.wait(WAIT)

    def hook_b(step: str) -> None:
        if step == "locked":
            b_locked.set()

    a = threading.Thread(target=lambda: results.setdefault("a", keyring.rotate(hook=hook_a)))
    a.start()
    assert issued.wait(WAIT)
    with pytest.raises(RotationBusy):
        keyring.rotate(wait=0)
    with pytest.raises(RotationBusy):
        keyring.rotate(wait=0.2)
    b = threading.Thread(target=lambda: results.setdefault("b", keyring.rotate(hook=hook_b)))
    b.start()
    assert not b_locked.wait(0.5)  # B is held off while A is paused
    release.set()
    a.join(WAIT)
    b.join(WAIT)
    assert results == {"a": 2, "b": 3}
    assert kek_dir.live_versions() == [3] and kek_dir.retired_versions() == [1, 2]
    assert _all_readable(env, keyring, deks)


def test_a_wrap_in_a_write_transaction_open_across_the_issue_is_rewrapped(env, keyring, kek_dir):
    """A writer wraps under generation 1 inside its write transaction; a rotation issues 2
    meanwhile. The re-wrap waits for the writer's commit (LMDB's write lock) and re-wraps its
    key, so retiring 1 loses nothing."""
    wrapped, commit = threading.Event(), threading.Event()
    cell_id, dek = os.urandom(32), new_dek()

    def writer() -> None:
        with env.write() as txn:
            keyring.put_dek(txn, cell_id, dek)
            wrapped.set()
            assert commit.wait(WAIT)

    w = threading.Thread(target=writer)
    w.start()
    assert wrapped.wait(WAIT)
    with env.read() as txn:
        assert keyring.versions_in_use(txn) == {}  # not committed yet

    def hook(step: str) -> None:
        if step == "issued":
            commit.set()  # the writer commits while the rotation waits for the write lock

    assert keyring.rotate(hook=hook) == 2
    w.join(WAIT)
    with env.read() as txn:
        assert keyring.versions_in_use(txn) == {2: 1}
        assert keyring.dek(txn, cell_id) == dek
    assert kek_dir.live_versions() == [2]


def test_a_writer_with_a_stale_cached_state_wraps_under_the_new_generation(env, tmp_path):
    """Another process's KekDirectory cached the old state (as if the replaced state file had
    come back with the same inode, size and timestamp); its next wrap still reads the state
    afresh and uses the generation in force, never a retired one."""
    rotator = KekDirectory(tmp_path / "kek")
    writer_dir = KekDirectory(tmp_path / "kek")
    writer = Keyring(env, writer_dir)
    assert writer_dir.current_version == 1
    _, old_state, old_bytes = writer_dir._checked
    Keyring(env, rotator).rotate()
    st = os.stat(writer_dir._state_path)
    # The cache says generation 1 is in force and live, keyed on the new file's signature
    # (with the bytes that state was parsed from, as a real copy is).
    writer_dir._checked = ((st.st_ino, st.st_mtime_ns, st.st_size), dict(old_state), old_bytes)
    cell_id, dek = os.urandom(32), new_dek()
    with env.write() as txn:
        writer.put_dek(txn, cell_id, dek)
    with env.read() as txn:
        assert writer.versions_in_use(txn) == {2: 1}
        assert Keyring(env, rotator).dek(txn, cell_id) == dek


def test_a_generation_still_wrapping_a_key_is_not_retired(env, keyring, kek_dir):
    """ "Retire a generation only after a check that no wrapped DEK or seed references it":
    a key left under generation 1 after the re-wrap (here planted by the hook) keeps 1 alive,
    the rotation says so, and the next rotation re-wraps it and retires 1."""
    deks = _fill(env, keyring, 5)
    planted, planted_dek = os.urandom(32), new_dek()
    deks_db = env.namespace(b"deks")
    kek1 = kek_dir.kek(1)

    def hook(step: str) -> None:
        if step == "rewrapped":
            with env.write() as txn:
                txn.put(planted, struct.pack(">I", 1) + wrap(kek1, planted_dek), db=deks_db)

    with pytest.raises(KeyringError):
        keyring.rotate(hook=hook)
    assert kek_dir.live_versions() == [1, 2]
    deks[planted] = planted_dek
    assert _all_readable(env, keyring, deks)
    assert keyring.rotate() == 3
    assert kek_dir.live_versions() == [3] and kek_dir.retired_versions() == [1, 2]
    assert _all_readable(env, keyring, deks)


def test_the_lock_is_per_kek_directory_and_released_after_a_failed_rotation(
    env, keyring, kek_dir, monkeypatch
):
    """A rotation that fails (here: the disk is full when issuing) holds no lock afterwards
    and changes nothing; the next one succeeds."""
    deks = _fill(env, keyring, 3)

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(kek_dir, "_write_file", full)
    with pytest.raises(OSError):
        keyring.rotate(wait=0)
    monkeypatch.undo()
    assert kek_dir.live_versions() == [1] and kek_dir.current_version == 1
    assert keyring.rotate(wait=0) == 2
    assert _all_readable(env, keyring, deks)


def test_a_writer_cannot_wrap_while_a_generation_is_being_retired(env, keyring, kek_dir):
    """The check and the retirement hold LMDB's write lock: a writer arriving meanwhile waits,
    then wraps under the generation in force, which is never the one just retired."""
    deks = _fill(env, keyring, 3)
    retiring, wrote = threading.Event(), threading.Event()
    cell_id, dek = os.urandom(32), new_dek()
    version: dict[str, int] = {}
    deks_db = env.namespace(b"deks")

    def writer() -> None:
        assert retiring.wait(WAIT)
        with env.write() as txn:
            keyring.put_dek(txn, cell_id, dek)
            raw = bytes(txn.get(cell_id, db=deks_db))
            version["v"] = struct.unpack(">I", raw[:4])[0]
        wrote.set()

    def hook(step: str) -> None:
        if step == "retire_recorded":
            retiring.set()
            assert not wrote.wait(0.5)  # the writer is held at LMDB's write lock

    w = threading.Thread(target=writer)
    w.start()
    assert keyring.rotate(hook=hook) == 2
    w.join(WAIT)
    assert wrote.is_set() and version == {"v": 2}
    assert kek_dir.retired_versions() == [1]
    deks[cell_id] = dek
    assert _all_readable(env, keyring, deks)


def test_damaged_wrapped_keys_do_not_stop_rotation_or_other_retirements(env, keyring, kek_dir):
    """One damaged entry must not block every later rotation (and so every erasure): values
    too short, naming a generation never issued, or failing the integrity check are left as
    they are; only a live generation still named by one is kept."""
    deks = _fill(env, keyring, 4)
    deks_db = env.namespace(b"deks")
    flipped = bytearray(struct.pack(">I", 1) + wrap(kek_dir.kek(1), new_dek()))
    flipped[-1] ^= 1
    with env.write() as txn:
        txn.put(b"s" * 32, b"\x00\x01", db=deks_db)
        txn.put(b"n" * 32, struct.pack(">I", 0xFFFFFFF0) + os.urandom(40), db=deks_db)
        txn.put(b"f" * 32, bytes(flipped), db=deks_db)
    with pytest.raises(KeyringError, match="generation\\(s\\) 1;"):
        keyring.rotate()
    assert kek_dir.live_versions() == [1, 2]  # 1 is kept: a stored value still names it
    assert _all_readable(env, keyring, deks)
    with env.write() as txn:
        keyring.destroy(txn, b"f" * 32)  # what a forget of that cell does
    assert keyring.rotate() == 3
    assert kek_dir.live_versions() == [3] and kek_dir.retired_versions() == [1, 2]
    assert _all_readable(env, keyring, deks)
