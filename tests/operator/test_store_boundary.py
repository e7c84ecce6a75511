"""The operator acts through the store's typed surface (docs/internals.md "The store"; issue
22): it never builds the store's private :class:`Body` (``Store.cell_change`` and
``Store.contract_change`` do), never computes a session tag (``Store.record_head``,
``Store.in_session``) and never reads the KEK directory (``Store.kek_version``).

Found by reading the source (AST), so a use cannot hide in a function body.
"""

from __future__ import annotations

import ast
from pathlib import Path

OPERATOR = Path(__file__).resolve().parents[2] / "saihm" / "operator"
#: The store's private parts, by the name an operator module would use to reach them.
PRIVATE = frozenset({"Body", "session_tag", "kek_dir"})


def private_uses(source: str) -> list[tuple[int, str]]:
    """Each (line, name) where ``source`` imports or reaches one of :data:`PRIVATE`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, a.name) for a in node.names if a.name in PRIVATE]
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Name) and node.id in PRIVATE:
            found.append((node.lineno, node.id))
    return found


def test_no_operator_module_reaches_the_store_private_parts() -> None:
    found = [
        f"saihm/operator/{path.name}:{line}: {name}"
        for path in sorted(OPERATOR.glob("*.py"))
        for line, name in private_uses(path.read_text())
    ]
    assert found == []


def test_the_detector_sees_each_private_part() -> None:
    """Control: an import of Body, a session tag and the KEK directory are each found."""
    source = (
        "from saihm.projections import Body, RecordHead\n"
        "tag = store.session_tag(h, s)\n"
        "v = store.kek_dir.current_version\n"
    )
    assert sorted(name for _, name in private_uses(source)) == ["Body", "kek_dir", "session_tag"]
