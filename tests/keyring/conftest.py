"""Fixtures: an LMDB storage (the Store's job in production) and a KEK directory."""

from __future__ import annotations

import pytest

from saihm.keyring import KekDirectory, Keyring
from saihm.storage.lmdb import LmdbStorage


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def kek_dir(tmp_path):
    return KekDirectory(tmp_path / "kek")


@pytest.fixture
def env(data_dir):
    e = LmdbStorage(data_dir, Keyring.DB_NAMES, map_size=1 << 24)
    yield e
    e.close()


@pytest.fixture
def keyring(env, kek_dir):
    return Keyring(env, kek_dir)
