"""Wrapped DEKs and seeds in LMDB; rotation."""

from __future__ import annotations

import os
import struct

import lmdb
import pytest

from saihm.errors import Conflict, NotFound
from saihm.keyring import KekUnavailable, Keyring, new_dek, new_holder_seed, rotate, unwrap


def test_put_and_get_dek_and_seed(env, keyring):
    cell, dek, holder, seed = os.urandom(32), new_dek(), os.urandom(32), new_holder_seed()
    with env.write() as txn:
        keyring.put_dek(txn, cell, dek)
        keyring.put_seed(txn, holder, seed)
    with env.read() as txn:
        assert keyring.dek(txn, cell) == dek
        assert keyring.seed(txn, holder) == seed
        raw = bytes(txn.get(cell, db=env.namespace(b"deks")))
    assert struct.unpack(">I", raw[:4])[0] == 1 and len(raw) == 44
    assert dek not in raw


def test_put_twice_conflicts(env, keyring):
    cell = os.urandom(32)
    with env.write() as txn:
        keyring.put_dek(txn, cell, new_dek())
        with pytest.raises(Conflict):
            keyring.put_dek(txn, cell, new_dek())


def test_destroy(env, keyring):
    cell = os.urandom(32)
    with env.write() as txn:
        keyring.put_dek(txn, cell, new_dek())
        assert keyring.destroy(txn, cell) is True
        assert keyring.destroy(txn, cell) is False
        with pytest.raises(NotFound) as err:
            keyring.dek(txn, cell)
        assert err.value.code == "erased"


def test_rotation_rewraps_everything_and_retires_old(env, keyring, kek_dir):
    deks = {os.urandom(32): new_dek() for _ in range(50)}
    seeds = {os.urandom(32): new_holder_seed() for _ in range(5)}
    with env.write() as txn:
        for c, d in deks.items():
            keyring.put_dek(txn, c, d)
        for h, s in seeds.items():
            keyring.put_seed(txn, h, s)
    v = rotate(env, kek_dir)
    assert v == 2 and kek_dir.live_versions() == [2] and kek_dir.retired_versions() == [1]
    with env.read() as txn:
        assert keyring.versions_in_use(txn) == {2: 55}
        assert all(keyring.dek(txn, c) == d for c, d in deks.items())
        assert all(keyring.seed(txn, h) == s for h, s in seeds.items())


def test_crash_between_rewrap_and_retire_is_finished_by_next_rotate(env, keyring, kek_dir):
    cell, dek = os.urandom(32), new_dek()
    with env.write() as txn:
        keyring.put_dek(txn, cell, dek)
    v2 = kek_dir.new_generation()
    with env.write() as txn:
        assert keyring.rewrap_all(txn, v2) == 1
    # "crash": no retirement happened; both generations are live.
    assert kek_dir.live_versions() == [1, 2]
    v3 = keyring.rotate()
    assert kek_dir.live_versions() == [v3] and kek_dir.retired_versions() == [1, 2]
    with env.read() as txn:
        assert keyring.dek(txn, cell) == dek


def test_aborted_rewrap_leaves_keys_readable(env, keyring, kek_dir):
    cell, dek = os.urandom(32), new_dek()
    with env.write() as txn:
        keyring.put_dek(txn, cell, dek)
    v2 = kek_dir.new_generation()
    txn = env.write()
    keyring.rewrap_all(txn, v2)
    txn.abort()
    with env.read() as txn:
        assert keyring.versions_in_use(txn) == {1: 1}
        assert keyring.dek(txn, cell) == dek


def test_key_under_a_retired_generation_is_unavailable(env, keyring, kek_dir):
    cell = os.urandom(32)
    with env.write() as txn:
        keyring.put_dek(txn, cell, new_dek())
    kek_dir.new_generation()
    kek_dir.retire(1)  # wrong order on purpose: retired without re-wrapping
    with env.read() as txn, pytest.raises(KekUnavailable):
        keyring.dek(txn, cell)


def test_new_keys_are_wrapped_under_the_current_generation(env, keyring, kek_dir):
    v2 = kek_dir.new_generation()
    cell, dek = os.urandom(32), new_dek()
    with env.write() as txn:
        keyring.put_dek(txn, cell, dek)
        raw = bytes(txn.get(cell, db=env.namespace(b"deks")))
    assert struct.unpack(">I", raw[:4])[0] == v2
    assert unwrap(kek_dir.kek(v2), raw[4:]) == dek


def test_keyring_never_opens_an_environment(monkeypatch, env, kek_dir):
    monkeypatch.setattr(lmdb, "open", lambda *a, **k: pytest.fail("Keyring opened LMDB"))
    Keyring(env, kek_dir).rotate()


def test_rewrap_in_chunks_rewraps_every_key_once(monkeypatch, env, keyring, kek_dir):
    """The re-wrap writes in chunks (a scan is not promised to survive writes into its own
    namespace): with a chunk of 3, 10 DEKs and 4 seeds (one damaged) are each re-wrapped once."""
    from saihm.keyring import keyring as module

    monkeypatch.setattr(module, "_REWRAP_CHUNK", 3)
    deks = {os.urandom(32): new_dek() for _ in range(10)}
    seeds = {os.urandom(32): new_holder_seed() for _ in range(4)}
    damaged = sorted(seeds)[1]
    with env.write() as txn:
        for cell, dek in deks.items():
            keyring.put_dek(txn, cell, dek)
        for holder, seed in seeds.items():
            keyring.put_seed(txn, holder, seed)
        raw = txn.get(damaged, db=env.namespace(b"seeds"))
        txn.put(damaged, raw[:-1] + bytes([raw[-1] ^ 1]), db=env.namespace(b"seeds"))
    v2 = kek_dir.new_generation()
    found: list[bytes] = []
    with env.write() as txn:
        assert keyring.rewrap_all(txn, v2, found) == 13
    assert found == [damaged]
    with env.read() as txn:
        assert keyring.versions_in_use(txn) == {v2: 13, 1: 1}
        assert all(keyring.dek(txn, cell) == dek for cell, dek in deks.items())
        assert all(keyring.seed(txn, h) == s for h, s in seeds.items() if h != damaged)
    with env.write() as txn:
        assert keyring.rewrap_all(txn, v2) == 0  # nothing left under another generation
