"""KEK generations on disk: fresh directory, monotonic versions, retirement, permissions."""

from __future__ import annotations

import os
import stat

import pytest

from saihm.keyring import KekDirectory, KekUnavailable, KeyringError, UnwrapError, unwrap, wrap


def test_fresh_directory_creates_generation_1_with_private_modes(tmp_path):
    kd = KekDirectory(tmp_path / "kek")
    assert kd.current_version == 1 and kd.live_versions() == [1]
    assert stat.S_IMODE(os.stat(kd.path).st_mode) == 0o700
    for f in kd.path.iterdir():
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f.name
    assert len(kd.kek(1)) == 32 and len(kd.memo_key()) == 32
    assert kd.memo_key() != kd.kek(1)


def test_reopening_keeps_keys(tmp_path):
    a = KekDirectory(tmp_path / "kek")
    v = a.new_generation()
    b = KekDirectory(tmp_path / "kek")
    assert b.current_version == v and b.kek(1) == a.kek(1) and b.memo_key() == a.memo_key()


def test_another_process_rotation_is_seen(tmp_path):
    a = KekDirectory(tmp_path / "kek")
    b = KekDirectory(tmp_path / "kek")
    v = b.new_generation()
    assert a.current_version == v


def test_unknown_and_retired_generations_raise_never_fall_back(kek_dir):
    with pytest.raises(KekUnavailable):
        kek_dir.kek(2)
    with pytest.raises(KekUnavailable):
        kek_dir.kek(0)
    v2 = kek_dir.new_generation()
    old = kek_dir.kek(1)
    kek_dir.retire(1)
    with pytest.raises(KekUnavailable):
        kek_dir.kek(1)
    assert kek_dir.kek(v2) != old
    assert not (kek_dir.path / "kek-00000001").exists()
    assert all(old not in f.read_bytes() for f in kek_dir.path.iterdir() if f.is_file())


def test_retired_numbers_are_never_reused(tmp_path):
    kd = KekDirectory(tmp_path / "kek")
    kd.new_generation()
    kd.retire(1)
    assert kd.new_generation() == 3
    assert KekDirectory(tmp_path / "kek").new_generation() == 4
    assert kd.retired_versions() == [1]


def test_cannot_retire_the_generation_in_force(kek_dir):
    with pytest.raises(KeyringError):
        kek_dir.retire(kek_dir.current_version)
    with pytest.raises(KekUnavailable):
        kek_dir.retire(7)


def test_group_readable_directory_is_refused(tmp_path):
    kd = KekDirectory(tmp_path / "kek")
    os.chmod(kd.path, 0o750)
    with pytest.raises(KeyringError):
        KekDirectory(tmp_path / "kek")


def test_interrupted_retirement_is_finished_on_open(tmp_path):
    kd = KekDirectory(tmp_path / "kek")
    kd.new_generation()
    leftover = kd.kek(1)
    kd.retire(1)
    # Simulate a crash after the state was written but before the file was removed.
    (kd.path / "kek-00000001").write_bytes(leftover)
    os.chmod(kd.path / "kek-00000001", 0o600)
    with pytest.raises(KekUnavailable):
        KekDirectory(tmp_path / "kek").kek(1)
    assert not (kd.path / "kek-00000001").exists()


def test_rfc3394_wrap():
    # RFC 3394 §4.6: 256-bit key data wrapped with a 256-bit KEK.
    kek = bytes.fromhex("000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F")
    key = bytes.fromhex("00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F")
    want = bytes.fromhex(
        "28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21"
    )
    assert wrap(kek, key) == want
    assert unwrap(kek, want) == key
    with pytest.raises(UnwrapError):
        unwrap(bytes(32), want)
    with pytest.raises(UnwrapError):
        unwrap(kek, want[:-1] + bytes([want[-1] ^ 1]))
