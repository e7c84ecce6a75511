"""The applied index and the schema version are read back when a store opens
(saihm/projections/meta.py; saihm-protocol "Order of effect and receipt").

A store whose ``p_meta`` says the projections lag the log, or were written under another schema
version, refuses to open (in this process and in another one) until ``saihm rebuild
--replace``; ``saihm verify --data`` names the stale entry.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from saihm.compose import initialise
from saihm.config import Config
from saihm.offline.fsck import check_store
from saihm.operator import Operator
from saihm.projections import StaleProjections, u64
from saihm.projections import apply as P
from saihm.store import Store

SAIHM = str(Path(sys.executable).with_name("saihm"))


@pytest.fixture
def data(tmp_path: Path) -> Iterator[tuple[Config, bytes]]:
    config = Config.for_data(tmp_path / "data")
    initialise(config)
    store = Store(config)
    try:
        holder = Operator(store, config).admin.create_holder()
    finally:
        store.close()
    yield config, holder


def _put_meta(config: Config, key: bytes, value: bytes) -> None:
    """A raw edit of ``p_meta``, as a careless operator or an old version would leave it,
    written through the storage itself so it lands in whichever store the data directory
    has (LMDB, or PostgreSQL under ``SAIHM_TEST_STORE=postgresql``)."""
    store = Store(config, check_applied=False)
    try:
        with store.storage.write() as txn:
            txn.put(key, value, db=store.storage.namespace(P.META))
    finally:
        store.close()


def _refused_in_another_process(config: Config, holder: bytes) -> str:
    done = subprocess.run(
        [SAIHM, "session", "open", "--data", str(config.data_dir), "--holder", holder.hex()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


def test_a_store_of_another_schema_version_refuses_to_open_until_rebuilt(
    data: tuple[Config, bytes], tmp_path: Path
) -> None:
    config, holder = data
    _put_meta(config, P.FORMAT, u64(1))
    with pytest.raises(StaleProjections, match=r"format 1, not 3.*rebuild --data DIR --replace"):
        Store(config)
    assert "rebuild --data DIR --replace" in _refused_in_another_process(config, holder)

    store = Store(config, check_applied=False)
    try:
        findings = [(f.database, f.check) for f in check_store(store).findings]
        assert ("p_meta", "schema version") in findings
        store.replace_projections(tmp_path / "rebuild")
        with store.read_txn() as txn:
            state = store.projections.state(txn)
        assert (state.applied, state.format) == (store.size(), P.PROJECTION_FORMAT)
    finally:
        store.close()
    Store(config).close()  # opens again


def test_an_applied_index_that_lags_the_log_refuses_to_open(data: tuple[Config, bytes]) -> None:
    config, holder = data
    _put_meta(config, P.APPLIED, u64(0))
    with pytest.raises(StaleProjections, match=r"projections reflect 0 of 1 log entries"):
        Store(config)
    assert "reflect 0 of 1" in _refused_in_another_process(config, holder)


def test_a_damaged_meta_value_is_a_clear_refusal_not_a_traceback(
    data: tuple[Config, bytes],
) -> None:
    config, holder = data
    _put_meta(config, P.APPLIED, b"\x01")
    with pytest.raises(StaleProjections, match=r"damaged.*rebuild --data DIR --replace"):
        Store(config)
    assert "damaged" in _refused_in_another_process(config, holder)
