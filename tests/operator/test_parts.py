"""The operator is parts composed over one context, not one class cut into files by mixins
(issue 12 Build 2; docs/internals.md "The operator").

The structural rules are read from the source: no part inherits from another, no module of
saihm/operator reads a private attribute of anything but ``self`` (another part, the context or
the store: ``store._db`` is the store's own business), and every result type is exported by the
package. The behavioural ones run a real operator: the parts share one context, and the part
that reports (``memory.status``) sees what the other parts wrote.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import saihm.operator as package
from saihm.operator import GovernanceTools, MemoryTools, Operator, SharingTools, ToolContext
from tests.support.world import World

ROOT = Path(package.__file__).resolve().parent
SOURCES = {path.stem: ast.parse(path.read_text()) for path in sorted(ROOT.glob("*.py"))}
PARTS = {"context", "memory", "sharing", "governance", "admin"}


def _classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [node for node in tree.body if isinstance(node, ast.ClassDef)]


def test_the_package_is_the_composition_and_its_parts() -> None:
    assert set(SOURCES) == PARTS | {"__init__"}
    old = ROOT.parent
    for gone in ("operator.py", "toolbase.py", "sharing.py", "governance.py"):
        assert not (old / gone).exists(), gone


def test_no_part_inherits_from_another_part() -> None:
    defined = {c.name: module for module, tree in SOURCES.items() for c in _classes(tree)}
    bad = []
    for module, tree in SOURCES.items():
        for cls in _classes(tree):
            bases = [ast.unparse(b) for b in cls.bases]
            if cls.name.endswith("Tools") or cls.name in ("Operator", "ToolContext"):
                # A part or the composition derives from nothing at all.
                if bases:
                    bad.append(f"{module}.{cls.name}({', '.join(bases)})")
                continue
            for base in bases:
                if defined.get(base, module) != module:
                    bad.append(f"{module}.{cls.name} derives from {defined[base]}.{base}")
    assert not bad, bad


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_reads_private_state_of_another_object() -> None:
    bad = []
    for module, tree in SOURCES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                owner = node.value
                if not (isinstance(owner, ast.Name) and owner.id == "self"):
                    bad.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("saihm"):
                bad.extend(
                    f"{module}:{node.lineno}: imports {node.module}.{alias.name}"
                    for alias in node.names
                    if _private(alias.name)
                )
    assert not bad, bad


def test_the_checks_above_would_see_a_mixin_and_a_private_read() -> None:
    mixin = ast.parse("class MemoryTools(SharingTools):\n    pass\n")
    assert [ast.unparse(b) for b in _classes(mixin)[0].bases] == ["SharingTools"]
    reach = ast.parse("def f(ctx):\n    return ctx.store._db\n")
    found = [n.attr for n in ast.walk(reach) if isinstance(n, ast.Attribute) and _private(n.attr)]
    assert found == ["_db"]


def test_every_result_type_is_exported_by_the_package() -> None:
    for module, tree in SOURCES.items():
        for cls in _classes(tree):
            if cls.name.startswith("_") or module == "__init__":
                continue
            assert cls.name in package.__all__, f"saihm.operator does not export {cls.name}"
            assert getattr(package, cls.name).__module__ == f"saihm.operator.{module}"


def test_the_parts_share_one_context(world: World) -> None:
    op = world.operator
    assert isinstance(op.context, ToolContext)
    assert op.memory.context is op.sharing.context is op.governance.context is op.context
    assert op.admin.context is op.context
    assert op.memory.sharing is op.sharing and op.memory.governance is op.governance
    assert op.store is world.store and op.config is world.config
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.context.store = world.store  # type: ignore[misc]
    assert op.context.now() == int(world.clock())


def test_status_reports_what_the_other_parts_wrote(world: World) -> None:
    """saihm_status lists the caller's contracts, the contracts naming it and the proposals:
    state that sharing and governance commit and memory reads back."""
    op = world.operator
    alice, bob = world.holder(), world.holder()
    a, b = world.store.authenticate(alice.token), world.store.authenticate(bob.token)
    cell = op.memory.remember(a, "for bob")
    shared = op.sharing.share(a, [bob.holder_id], [cell.cell_id], "PERMANENT", "read", None)
    proposed = op.governance.propose(a, "protocol_upgrade", None, None)

    mine = op.memory.status(a)
    assert [c.contract_id for c in mine.contracts] == [shared.contract_id]
    assert [p.proposal_id for p in mine.governance] == [proposed.proposal_id]
    theirs = op.memory.status(b)
    assert [(c.contract_id, c.accepted) for c in theirs.incoming] == [(shared.contract_id, False)]

    op.sharing.respond(b, shared.contract_id, accept=True)
    op.governance.vote(b, proposed.proposal_id, True)
    (incoming,) = op.memory.status(b).incoming
    assert incoming.accepted is True
    (summary,) = op.memory.status(a).governance
    assert (summary.tally_for, summary.tally_against) == (1, 0)

    op.sharing.revoke_share(a, shared.contract_id)
    assert op.memory.status(a).contracts == () and op.memory.status(b).incoming == ()


@pytest.mark.parametrize("part", [MemoryTools, SharingTools, GovernanceTools])
def test_operator_forwards_nothing(part: type) -> None:
    """Callers name the part: Operator carries no copy of a part's operations."""
    operations = {n for n in vars(part) if not n.startswith("_")}
    assert operations and not operations & set(vars(Operator))
