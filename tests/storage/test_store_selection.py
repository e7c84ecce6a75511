"""The store's tests run on the driver ``SAIHM_TEST_STORE`` names (``.ci/run`` runs them on
both): under ``postgresql`` every data directory's store is a schema of its own, the same one
in every process of the run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from saihm.config import Config
from tests.support.postgres import store_driver


def test_config_for_data_names_the_selected_store(tmp_path: Path) -> None:
    config = Config.for_data(tmp_path / "a")
    if store_driver() == "lmdb":
        assert config.store is None
        assert config.storage_location == tmp_path / "a" / "lmdb"
        return
    assert config.store is not None and config.store.startswith("postgresql://")
    assert config.storage_location == config.store
    assert Config.for_data(tmp_path / "a").store == config.store
    assert Config.for_data(tmp_path / "b").store != config.store
    explicit = "postgresql://u@127.0.0.1:1/elsewhere"
    assert Config.for_data(tmp_path / "c", store=explicit).store == explicit
    # Any Python process the test starts (a saihm command, a child script) opens the same
    # schema for the same directory, with no help from its command line.
    code = "import sys; from saihm.config import Config; print(Config.for_data(sys.argv[1]).store)"
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "a")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd="/",
    ).stdout.strip()
    assert out == config.store


def test_a_copied_data_directory_copies_its_store(tmp_path: Path) -> None:
    import shutil

    from saihm.storage import open_storage
    from tests.support.postgres import copy_test_store

    names = (b"a", b"b")
    (tmp_path / "src" / "data").mkdir(parents=True)
    source = Config.for_data(tmp_path / "src" / "data")
    storage = open_storage(source.storage_location, names)
    with storage.write() as txn:
        txn.put(b"k", b"v", db=storage.namespace(b"a"))
    storage.close()
    shutil.copytree(tmp_path / "src", tmp_path / "dst")
    copy_test_store(tmp_path / "src" / "data", tmp_path / "dst" / "data")
    target = Config.for_data(tmp_path / "dst" / "data")
    copy = open_storage(target.storage_location, (*names, b"c"))  # a new namespace too
    try:
        with copy.write() as txn:
            txn.put(b"k", b"changed", db=copy.namespace(b"c"))
        with copy.read() as snap:
            assert snap.get(b"k", db=copy.namespace(b"a")) == b"v"
    finally:
        copy.close()
    again = open_storage(source.storage_location, names)
    try:
        with again.read() as snap:  # the source is untouched by the copy's writes
            assert snap.get(b"k", db=again.namespace(b"a")) == b"v"
    finally:
        again.close()


def test_the_store_opens_the_selected_driver(tmp_path: Path) -> None:
    """The PostgreSQL pass really runs the store on PostgreSQL (not LMDB under another name)."""
    from saihm.compose import initialise
    from saihm.store import Store

    config = Config.for_data(tmp_path / "data")
    initialise(config)
    store = Store(config)
    try:
        assert store.storage.kind == store_driver()
    finally:
        store.close()
