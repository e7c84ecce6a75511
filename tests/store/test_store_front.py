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
