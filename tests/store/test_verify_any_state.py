"""``saihm verify --data`` answers every stored state with a finding or OK (issue 21, item 5a).

It once exited 70 ("internal error") on an edit of the log's rows. Hypothesis draws raw row
edits of a populated store (tests/store/damage.py ``random_edits``: flip a byte, delete, swap,
drop the last row, and a copy of a row under a new key, which for ``leaves`` is the same leaf
stored at a second index), applies them with ``lmdb.open``, runs ``verify --data`` and undoes
them: the exit code is 0 or 1, never 70. The PostgreSQL form is in
tests/multinode/test_tamper_postgres.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.postgres import lmdb_only

from .damage import Edit, lmdb_raw, random_edits, verify_code
from .populated import Populated, populate

pytestmark = lmdb_only("its raw edits open DATA/lmdb with lmdb.open")


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Populated:
    p = populate(tmp_path_factory.mktemp("verify-any"))
    p.world.store.close()
    return p


def edits_of(raw, names: list[bytes], seed: int) -> list[Edit]:
    tables = [(name, rows) for name in names if (rows := raw.rows(name))]
    return random_edits(tables, random.Random(seed), insert=True)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(seed=st.integers(0, 2**32 - 1), pick=st.integers(0, 2**16))
def test_verify_data_never_exits_with_an_internal_error(
    populated: Populated, capsys: pytest.CaptureFixture[str], seed: int, pick: int
) -> None:
    config = populated.world.config
    data: Path = config.data_dir
    with lmdb_raw(config) as raw:
        from .populated import named_databases

        edits = edits_of(raw, named_databases(raw.env), seed)
        name, _, changes = edits[pick % len(edits)]
        undo = [(key, _get(raw, name, key)) for key, _ in changes]
        for key, value in changes:
            _set(raw, name, key, value)
    try:
        verify_code(capsys, ["--data", str(data)])
    finally:
        with lmdb_raw(config) as raw:
            for key, value in reversed(undo):
                _set(raw, name, key, value)


def _get(raw, name: bytes, key: bytes) -> bytes | None:
    return dict(raw.rows(name)).get(key)


def _set(raw, name: bytes, key: bytes, value: bytes | None) -> None:
    if value is not None or _get(raw, name, key) is not None:
        raw.set(name, key, value)


@pytest.mark.parametrize(
    ("source", "target"),
    [(0, "end"), (-1, "end"), (3, "end"), (0, 5), (-1, 0), (2, "gap"), (-2, -1)],
    ids=str,
)
def test_a_duplicated_leaf_row_is_a_finding_not_an_internal_error(
    populated: Populated, capsys: pytest.CaptureFixture[str], source: int, target: object
) -> None:
    """The same leaf stored at a second index: appended after the last, written over another
    leaf, or beyond a gap."""
    from saihm.projections.keys import u64

    config = populated.world.config
    with lmdb_raw(config) as raw:
        leaves = raw.rows(b"leaves")
        size = len(leaves)
        where = {"end": size, "gap": size + 3}.get(target, target)  # type: ignore[arg-type]
        key = u64(where % size if isinstance(where, int) and where < 0 else where)
        before = _get(raw, b"leaves", key)
        raw.set(b"leaves", key, leaves[source][1])
    try:
        assert verify_code(capsys, ["--data", str(config.data_dir)]) == 1
    finally:
        with lmdb_raw(config) as raw:
            _set(raw, b"leaves", key, before)
