"""Rebuild output is byte-identical to what the untyped projections wrote (issue 12, Build 3).

tests/fixtures/projections/ holds a log written by the code before the projection records were
typed, and every projection database as that code rebuilt it (README.md there). Replaying the
log with today's code must give the same keys and the same values, record MACs included.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cbor2
import pytest

from saihm.events.records import (
    CellRecord,
    ContractRecord,
    ErasureRecord,
    GrantRecord,
    HolderRecord,
    ProposalRecord,
    RecordHead,
    RevocationRecord,
    Tally,
    Vote,
)
from saihm.projections import Body, LeafView, Projections, RecordSeal, derive_record_key
from saihm.projections import apply as P
from saihm.storage.lmdb import LmdbStorage

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "projections"
BODY_OPERATIONS = {"REMEMBER", "SHARE"}  # saihm/store.py: the events with a private body

# Every database whose values are records, with the record type (saihm/events/records.py).


def _fixture() -> tuple[list[bytes], dict[bytes, bytes], bytes, dict[str, list[list[bytes]]]]:
    log = cbor2.loads((FIXTURE / "log.cbor").read_bytes())
    expected = cbor2.loads((FIXTURE / "expected.cbor").read_bytes())
    return log[1], log[2], log[3], expected


@pytest.fixture
def rebuilt(tmp_path: Path) -> Iterator[tuple[Projections, LmdbStorage]]:
    leaves, bodies, memo, _ = _fixture()
    storage = LmdbStorage(tmp_path / "p", P.DB_NAMES, map_size=1 << 26)
    projections = Projections(storage, RecordSeal(derive_record_key(memo)))
    with storage.write() as txn:
        for index, leaf in enumerate(leaves):
            view = LeafView.from_leaf(leaf)
            body = None
            if view.operation in BODY_OPERATIONS:
                body = Body.decode(bodies[view.subject_id])
            projections.apply(txn, index, view, body, record_applied=False)
        projections.mark_applied(txn, len(leaves))
    yield projections, storage
    storage.close()


def test_the_fixture_exercises_every_operation_with_projection_state() -> None:
    leaves, _, _, expected = _fixture()
    operations = {cbor2.loads(leaf)[3] for leaf in leaves}
    assert operations >= {
        "KEY",
        "REMEMBER",
        "RECALL",
        "STATUS",
        "FORGET",
        "SHARE",
        "ACCEPT",
        "DECLINE",
        "REVOKE",
        "GRANT",
        "UNGRANT",
        "PROPOSE",
        "VOTE",
    }
    assert set(expected) == {name.decode() for name in P.DB_NAMES}
    assert all(expected[name.decode()] for name in P.DB_NAMES), "every database has entries"


def test_rebuild_of_the_fixture_log_is_byte_identical(
    rebuilt: tuple[Projections, LmdbStorage],
) -> None:
    projections, storage = rebuilt
    _, _, _, expected = _fixture()
    with storage.read() as txn:
        for name in P.DB_NAMES:
            got = [[k, v] for k, v in projections.items(txn, name)]
            assert got == expected[name.decode()], f"{name.decode()} differs from the fixture"


def test_the_rebuilt_fixture_reads_back_through_the_typed_queries(
    rebuilt: tuple[Projections, LmdbStorage],
) -> None:
    """Every stored record decodes, and re-encodes to the bytes that are stored."""
    projections, storage = rebuilt
    leaves, _, _, expected = _fixture()
    with storage.read() as txn:
        state = projections.state(txn)
        assert (state.applied, state.format) == (len(leaves), P.PROJECTION_FORMAT)
        state.require_current(len(leaves))
        decoded = 0
        for name, kind in RECORD_TYPES.items():
            for key, _ in projections.items(txn, name):
                value = projections.get(txn, name, key)
                assert value is not None, f"{name.decode()} {key.hex()}: MAC refused"
                assert kind.decode(value).encode() == value
                decoded += 1
        assert decoded == sum(len(expected[name.decode()]) for name in RECORD_TYPES)


RECORD_TYPES = {
    P.CELLS: CellRecord,
    P.RECORD_HEADS: RecordHead,
    P.CONTRACTS: ContractRecord,
    P.ERASURES: ErasureRecord,
    P.HOLDERS: HolderRecord,
    P.PROPOSALS: ProposalRecord,
    P.VOTES: Vote,
    P.TALLIES: Tally,
    P.GRANTS: GrantRecord,
    P.REVOKED: RevocationRecord,
}
