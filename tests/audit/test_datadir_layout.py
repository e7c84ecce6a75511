"""The offline reader's copy of the data directory layout matches the operator's.

saihm/audit/datadir.py may not import the store or the projections (DESIGN.md "Layers"), so it
re-declares the database names; the records themselves it decodes with the one definition in
saihm/events/records.py. A renamed database would make ``saihm verify --data`` read nothing.
"""

from __future__ import annotations

from saihm.audit import datadir
from saihm.config import Config
from saihm.projections import apply as P
from saihm.projections.cells import ERASURES
from saihm.projections.governance import TALLIES
from saihm.store import CHECKPOINTS, OWN_DBS
from saihm.translog import TreeStorage


def test_the_database_names_are_the_operators() -> None:
    assert datadir.ERASURES == ERASURES == P.ERASURES
    assert datadir.TALLIES == TALLIES == P.TALLIES
    assert datadir.BODIES in OWN_DBS
    assert datadir.CHECKPOINTS == CHECKPOINTS
    assert TreeStorage.DB_NAMES[0] == datadir.LEAVES


def test_the_published_databases_are_not_mac_bound() -> None:
    """The verifier reads the erasure list and the tallies as stored: no record MAC."""
    assert datadir.ERASURES not in P.SEALED
    assert datadir.TALLIES not in P.SEALED


def test_the_file_names_are_the_configs(tmp_path: object) -> None:
    config = Config.for_data(tmp_path / "data")  # type: ignore[operator]
    assert config.lmdb_dir.relative_to(config.data_dir).as_posix() == datadir.LMDB_SUBDIR
    assert config.verifier_keys_file.name == datadir.VERIFIER_KEYS_FILE
    assert config.authority_public_key_file.name == datadir.AUTHORITY_PUB
