"""Fixtures: an LMDB environment (the Store's job in production) and a KEK directory."""

from __future__ import annotations

import lmdb
import pytest

from saihm.keyring import KekDirectory, Keyring


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
    e = lmdb.open(str(data_dir), max_dbs=len(Keyring.DB_NAMES), map_size=1 << 24)
    yield e
    e.close()


@pytest.fixture
def keyring(env, kek_dir):
    return Keyring(env, kek_dir)
