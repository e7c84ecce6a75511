"""The store's tests run on the driver ``SAIHM_TEST_STORE`` names (``.ci/run`` runs them on
both): under ``postgresql`` every data directory's store is a schema of its own, the same one
in every process of the run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from saihm.config import Config
from tests.support.postgres import store_driver

ROOT = Path(__file__).resolve().parents[2]


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
    # A child process given the same directory opens the same schema.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from tests.support.postgres import use_test_store; use_test_store();"
        "from saihm.config import Config; print(Config.for_data(sys.argv[2]).store)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT), str(tmp_path / "a")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert out == config.store
