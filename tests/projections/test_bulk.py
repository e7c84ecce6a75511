"""The bulk apply (saihm/projections/bulk.py) writes exactly what the live apply writes.

``saihm rebuild`` and ``verify --data`` replay the log through :func:`apply_leaves`, which
collects each chunk's rows per namespace and writes them sorted; the live store applies one
leaf at a time with :meth:`Projections.apply`. Both must leave byte-identical namespaces, over
any sequence of operations (drawn here from the fixture log of every operation, repeats
included, split into chunks at random points so that handlers read state both from the
chunk's pending rows and from the storage).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path

import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saihm.projections import Body, LeafView, Projections, RecordSeal, derive_record_key
from saihm.projections import apply as P
from saihm.projections.bulk import LeafFailed, apply_leaves
from saihm.storage.lmdb import LmdbStorage
from tests.projections.test_rebuild_fixture import BODY_OPERATIONS, _fixture

LEAVES, BODIES, MEMO, EXPECTED = _fixture()
SEAL = RecordSeal(derive_record_key(MEMO))


def _body_of(bodies: dict[bytes, bytes]) -> Callable[[str, bytes], Body | None]:
    def body_of(operation: str, subject_id: bytes) -> Body | None:
        if operation not in BODY_OPERATIONS:
            return None
        raw = bodies.get(subject_id)
        return None if raw is None else Body.decode(raw)

    return body_of


def _live(root: Path, leaves: Sequence[bytes]) -> tuple[Projections, LmdbStorage]:
    """One leaf per write transaction through Projections.apply, as the live store does."""
    storage = LmdbStorage(root / "live", P.DB_NAMES, map_size=1 << 26)
    projections = Projections(storage, SEAL)
    body_of = _body_of(BODIES)
    for index, leaf in enumerate(leaves):
        view = LeafView.from_leaf(leaf)
        with storage.write() as txn:
            projections.apply(txn, index, view, body_of(view.operation, view.subject_id))
    return projections, storage


def _bulk(
    root: Path, leaves: Sequence[bytes], cuts: Sequence[int]
) -> tuple[Projections, LmdbStorage]:
    """The leaves in chunks ending at ``cuts``, one write transaction and flush per chunk."""
    storage = LmdbStorage(root / "bulk", P.DB_NAMES, map_size=1 << 26)
    projections = Projections(storage, SEAL)
    bounds = [0, *sorted(set(cuts) & set(range(1, len(leaves)))), len(leaves)]
    for first, end in pairwise(bounds):
        with storage.write() as txn:
            apply_leaves(projections, txn, first, leaves[first:end], _body_of(BODIES), count=end)
    return projections, storage


def _dump(projections: Projections, storage: LmdbStorage) -> dict[bytes, list[tuple[bytes, bytes]]]:
    with storage.read() as txn:
        return {name: list(projections.items(txn, name)) for name in P.DB_NAMES}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(st.integers(0, len(LEAVES) - 1), min_size=1, max_size=90),
    cuts=st.lists(st.integers(1, 89), max_size=6),
)
def test_bulk_apply_equals_the_live_apply_per_namespace(picks: list[int], cuts: list[int]) -> None:
    leaves = [LEAVES[i] for i in picks]
    with tempfile.TemporaryDirectory() as tmp:
        live, live_storage = _live(Path(tmp), leaves)
        bulk, bulk_storage = _bulk(Path(tmp), leaves, cuts)
        try:
            want, got = _dump(live, live_storage), _dump(bulk, bulk_storage)
            for name in P.DB_NAMES:
                assert got[name] == want[name], f"{name.decode()} differs"
        finally:
            live_storage.close()
            bulk_storage.close()


@pytest.mark.parametrize("cuts", [[], [1], [7, 30, 31, 60]])
def test_bulk_apply_of_the_fixture_log_is_the_pinned_bytes(tmp_path: Path, cuts: list[int]) -> None:
    projections, storage = _bulk(tmp_path, LEAVES, cuts)
    try:
        dump = _dump(projections, storage)
        for name in P.DB_NAMES:
            assert [[k, v] for k, v in dump[name]] == EXPECTED[name.decode()], name.decode()
    finally:
        storage.close()


def test_a_damaged_body_names_its_leaf_and_writes_nothing(tmp_path: Path) -> None:
    index = next(i for i, leaf in enumerate(LEAVES) if cbor2.loads(leaf)[3] == "REMEMBER")
    subject = cbor2.loads(LEAVES[index])[2]
    damaged = {**BODIES, subject: BODIES[subject][:-5]}
    storage = LmdbStorage(tmp_path / "p", P.DB_NAMES, map_size=1 << 26)
    projections = Projections(storage, SEAL)
    try:
        txn = storage.write()
        with pytest.raises(LeafFailed) as caught:
            apply_leaves(projections, txn, 0, LEAVES, _body_of(damaged), count=len(LEAVES))
        txn.abort()
        assert caught.value.index == index
        with storage.read() as read:
            assert all(read.count(projections.db[name]) == 0 for name in P.DB_NAMES)
    finally:
        storage.close()


def test_the_bench_peer_puts_exactly_the_rows_of_the_rebuild(tmp_path: Path) -> None:
    """``saihm bench store`` compares the rebuild with raw LMDB doing the same puts: the peer
    must write every row of the rebuilt storage, the same keys and values, and no other."""
    from saihm.store.rebuild import raw_put_seconds

    projections, storage = _bulk(tmp_path, LEAVES, [20])
    want = _dump(projections, storage)
    storage.close()
    seconds, rows = raw_put_seconds(tmp_path / "bulk", tmp_path / "raw", len(LEAVES))
    assert seconds > 0
    assert rows == sum(len(pairs) for pairs in want.values())
    raw = LmdbStorage(tmp_path / "raw", P.DB_NAMES, readonly=True)
    try:
        with raw.read() as txn:
            got = {name: list(txn.scan(raw.namespace(name))) for name in P.DB_NAMES}
    finally:
        raw.close()
    assert got == want
