"""Callers ask the store typed questions; none reads its projections (issue 36, item 2).

Outside ``saihm/store/`` and ``saihm/projections/`` no module reads the ``projections``
attribute of anything (``store.projections.cells.get(...)``, ``records = store.projections``):
it asks :class:`saihm.store.Questions` (``store.questions()``, ``store.ask(txn)``,
``store.cell_record``, ``store.holder_known``, ``store.contract``, ``store.grant``), so what
callers may read is one list, docs/internals.md "The store's questions". Importing a record
type or a codec from ``saihm.projections`` is not a read.

Found by reading the source (AST), as tests/store/test_one_writer.py finds writes.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.world import World

ROOT = Path(__file__).resolve().parents[2] / "saihm"

#: The store and the floor it reads with its own transactions.
OWNERS = ("store", "projections")


def projection_reads(tree: ast.AST) -> list[int]:
    """The line of each ``<something>.projections`` attribute read in ``tree``."""
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "projections"
    )


def outside_reads() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.split("/")[0] in OWNERS:
            continue
        for line in projection_reads(ast.parse(path.read_text(), filename=str(path))):
            found.append(f"saihm/{rel}:{line}: reads .projections")
    return found


def test_no_module_outside_the_store_reads_its_projections() -> None:
    assert outside_reads() == []


def test_the_detector_sees_a_read_and_not_an_import() -> None:
    """Control: the shapes the rule forbids are found; an import of a record type is not."""
    source = """
from saihm.projections import CellRecord
import saihm.projections.keys
record = store.projections.cells.get(txn, cell_id)
records = ctx.store.projections
"""
    assert projection_reads(ast.parse(source)) == [4, 5]


def test_the_questions_answer_from_the_store(world: World) -> None:
    """Each question answers what the projections hold, and changes with a logged change."""
    store = world.store
    a, b = world.holder(), world.holder()
    cell = bytes.fromhex(world.call(a, "saihm_remember", content="Priya is vegetarian")["cellId"])
    contract = bytes.fromhex(world.share_accepted(a, b, [cell.hex()]))
    grant_id, _ = world.operator.admin.grant(a.holder_id, None, int(world.clock()) + 60)
    stranger = bytes(32)
    record = store.cell_record(cell)
    assert record is not None and record.owner == a.holder_id and not record.erased
    assert store.cell_record(stranger) is None
    assert store.holder_known(a.holder_id) and not store.holder_known(stranger)
    got = store.contract(contract)
    assert got is not None and got.holder == a.holder_id and b.holder_id in got.accepted
    grant = store.grant(grant_id)
    assert grant is not None and grant.holder == a.holder_id and not grant.revoked
    with store.questions() as q:
        assert list(q.live_cells_of_holder(a.holder_id)) == [cell]
        assert q.session_wrote(a.holder_id, a.session_id)
        assert not q.session_wrote(b.holder_id, b.session_id)
        assert [i for i, _ in q.contracts_of_holder(a.holder_id)] == [contract]
        assert [i for i, _ in q.contracts_to_grantee(b.holder_id)] == [contract]
        assert len(list(q.receipt_times_of_holder(a.holder_id))) == 4  # KEY REMEMBER SHARE GRANT
        assert not q.revoked(a.holder_id, a.session_id)
    world.call(a, "saihm_forget", id=cell.hex())
    world.operator.admin.revoke_session(a.holder_id, a.session_id)
    world.operator.admin.ungrant(grant_id)
    with store.questions() as q:
        assert q.cell_erased(cell) and not q.cell_erased(stranger)
        assert q.revoked(a.holder_id, a.session_id)
        assert q.cell_records([cell, stranger])[1] is None
    assert store.grant(grant_id).revoked  # type: ignore[union-attr]


def test_the_ops_questions(world: World) -> None:
    """The figures /readyz and /metrics read: log sizes in one snapshot, KEK age, usage."""
    store = world.store
    world.holder()
    size, covered = store.log_sizes()
    assert size == store.size() and covered <= size
    store.checkpoint_now()
    assert store.log_sizes() == (store.size(), store.size())
    issued = store.kek_dir.issued_at(store.kek_version)
    assert store.kek_age(issued + 90.5) == 90.5
    assert store.kek_age(issued - 10) == 0.0
    assert store.usage().used > 0
