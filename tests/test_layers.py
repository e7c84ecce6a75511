"""DESIGN.md "Layers" (and docs/internals.md): every package and top-level module of saihm has a
layer, imports point down or stay within their layer, no import cycle exists between modules or
between the units of the table, and the verifier and the client side stay independent.

An import is any ``import``/``from ... import`` anywhere in a module (at import time, inside a
function, under ``if TYPE_CHECKING:``) and any ``importlib.import_module("saihm...")`` or
``_delegate("saihm...", ...)`` by name, so a dependency cannot hide in a function body.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "saihm"

#: The layers, bottom first. A unit is a top-level module or a package of saihm (``saihm`` is
#: the package's own ``__init__``); an entry of three parts ranks one module of a package apart
#: from the rest of it. A unit may import units of its own layer or below; never above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "shared leaves: import nothing of saihm",
        (
            "saihm",
            "saihm.errors",
            "saihm.names",
            "saihm.mldsa",
            "saihm.logs",
            "saihm.commands.helpformat",
        ),
    ),
    (
        "the core and small helpers: import only the leaves",
        (
            "saihm.translog",
            "saihm.events",
            "saihm.storage",
            "saihm.retrieval",
            "saihm.store.jobs",
            "saihm.client",
        ),
    ),
    (
        "parts over the core, the configuration, and the client side over saihm.client",
        (
            "saihm.config",
            "saihm.keyring",
            "saihm.projections",
            "saihm.witness",
            "saihm.mcp",
            "saihm.integrations",
        ),
    ),
    ("the verifier", ("saihm.audit",)),
    ("the read path's result types", ("saihm.store.read.views",)),
    ("the recall cache", ("saihm.store.read.cache",)),
    ("the store's environment", ("saihm.store.environment",)),
    (
        "the store's parts over its environment",
        (
            "saihm.store.auth",
            "saihm.store.commit",
            "saihm.store.publiclog",
            "saihm.store.rebuild",
            "saihm.store.keys",
        ),
    ),
    ("which cells a read considers", ("saihm.store.read.candidates",)),
    ("the holder-wide read", ("saihm.store.read.holderwide",)),
    ("the checked read path", ("saihm.store.read.reader",)),
    ("held proposals, written through the group commit", ("saihm.store.held",)),
    ("the store: the composition of its parts", ("saihm.store",)),
    (
        "the operator's parts over one context",
        (
            "saihm.operator.context",
            "saihm.operator.sharing",
            "saihm.operator.governance",
            "saihm.operator.memory",
            "saihm.operator.admin",
            # The authority's key, the checks its service shares with the identity commands,
            # and the person's passkeys, links and sign-ins (sealed records in the store).
            "saihm.authority",
        ),
    ),
    ("the operator and the composition root", ("saihm.operator", "saihm.compose")),
    ("the protocol's JSON edge: params, recall window, renderers, bindings", ("saihm.protocol",)),
    (
        "the edges: HTTP, the provider, the witness server and the long-running services",
        (
            "saihm.http",
            "saihm.provider",
            "saihm.services",
        ),
    ),
    ("entry points: the command line and the benchmarks", ("saihm.commands", "saihm.bench")),
)

#: Imports that break the rules today, each with the colleague's change that removes it. An
#: exception that no longer exists fails ``test_known_exceptions_still_exist``: delete it here
#: when the fix lands. Nothing may be added to this table.
KNOWN_EXCEPTIONS: Mapping[tuple[str, str], str] = {}

# What each package may import from saihm (besides itself and the shared leaves).
FORBIDDEN = {
    "saihm.translog": {
        "events",
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "mcp",
        "audit",
        "provider",
        "commands",
    },
    "saihm.events": {
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "mcp",
        "audit",
        "provider",
        "commands",
    },
    "saihm.keyring": {
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "mcp",
        "audit",
        "provider",
        "commands",
    },
    "saihm.audit": {
        "store",
        "operator",
        "keyring",
        "http",
        "authority",
        "projections",
        "provider",
        "commands",
        "mcp",
    },
    # The witness's state and the submitter see the log only through translog and a
    # store-shaped protocol; the witness's server is saihm.services.witness.
    "saihm.witness": {
        "http",
        "services",
        "events",
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "mcp",
        "audit",
        "provider",
        "commands",
    },
    "saihm.mcp": {
        "translog",
        "events",
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "audit",
        "provider",
        "commands",
        "mldsa",
    },
    # The client library obeys the MCP client's rule, and never imports the MCP client.
    "saihm.client": {
        "translog",
        "events",
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "audit",
        "provider",
        "commands",
        "mldsa",
        "mcp",
    },
    # The authority's key, actions and person records serve the operator's composition; the
    # service that composes an operator and serves HTTP is saihm.services.authority.
    "saihm.authority": {
        "compose",
        "operator",
        "protocol",
        "http",
        "provider",
        "services",
        "witness",
        "mcp",
        "audit",
        "commands",
        "bench",
    },
    # The store serves the operator and the authority's actions, and knows neither: what it
    # needs of them (the authority seed's file name, for backups) comes from saihm.config.
    "saihm.store": {
        "authority",
        "operator",
        "protocol",
        "http",
        "provider",
        "witness",
        "mcp",
        "audit",
        "commands",
        "bench",
    },
    # The log API runs the witness submitter the composition hands it (its Submitter
    # protocol), so the witness, whose server borrows http.listen, stays below HTTP.
    "saihm.http": {"witness", "commands", "bench"},
    # The operations speak bytes and typed values; parsing and rendering JSON is the edge's.
    "saihm.operator": {"protocol", "http", "provider", "commands", "bench", "mcp"},
    # Framework adapters speak only through the client library: they hold no keys.
    "saihm.integrations": {
        "translog",
        "events",
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "audit",
        "provider",
        "commands",
        "mldsa",
        "mcp",
    },
}
MCP_FORBIDDEN_THIRD_PARTY = {"cryptography", "lmdb", "pqcrypto", "cbor2"}
#: Calls whose first argument names a module that is imported by name.
_IMPORTERS = {"import_module", "_delegate"}


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (both module names) at ``where`` (``path:line``)."""

    source: str
    target: str
    where: str


def module_name(path: Path, root: Path) -> str:
    """``saihm/audit/mirror.py`` -> ``saihm.audit.mirror``; a package's ``__init__`` is itself."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root`` by name."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _named(node: ast.AST) -> str | None:
    """The module a by-name import call names, or the constant prefix of an f-string one."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in _IMPORTERS:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values:
        head = arg.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return head.value.rstrip(".")
    return None


def _imported(node: ast.AST, package: str, known: Mapping[str, Path]) -> list[str]:
    """The dotted names ``node`` imports (submodules where ``from X import y`` names one)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            origin = ".".join([*base, node.module] if node.module else base)
        else:
            origin = node.module or ""
        return [
            f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
            for alias in node.names
        ]
    named = _named(node)
    return [named] if named else []


def _resolve(name: str, known: Mapping[str, Path]) -> str | None:
    """The deepest module of ``known`` that ``name`` is or lies in."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_in(path: Path, root: Path, known: Mapping[str, Path]) -> Iterator[tuple[str, int]]:
    """The one import walker: every dotted name the module at ``path`` (of the package at
    ``root``, whose modules are ``known``) imports, with the line, in the sense of this file's
    docstring. Relative imports are resolved; third-party names are yielded too."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        for imported in _imported(node, package, known):
            yield imported, getattr(node, "lineno", 0)


def import_edges(root: Path) -> list[Edge]:
    """Every import from one module of the package at ``root`` to another of it."""
    known = modules(root)
    top = root.name
    edges = []
    for name, path in known.items():
        for imported, line in imports_in(path, root, known):
            if imported.split(".")[0] != top:
                continue
            target = _resolve(imported, known)
            if target is not None and target != name:
                edges.append(Edge(name, target, f"{path.relative_to(root.parent)}:{line}"))
    return edges


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) through each strongly connected set of ``edges``."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
        graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Tarjan's algorithm without recursion: (node, iterator over its successors).
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(_path_back(graph, component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _path_back(graph: Mapping[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle from the least member of ``component`` back to itself, inside it."""
    start = min(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if nxt not in parent:
                    parent[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{sorted(component)} is not strongly connected")


def rank() -> dict[str, int]:
    """Each unit of :data:`LAYERS` and its layer number (0 at the bottom)."""
    return {unit: level for level, (_, units) in enumerate(LAYERS) for unit in units}


def unit_of(module: str, ranked: Mapping[str, int]) -> str:
    """The unit ``module`` belongs to: a three-part entry of the table that holds it, else its
    top-level module or package (``saihm.audit.mirror`` -> ``saihm.audit``)."""
    parts = module.split(".")
    for depth in range(len(parts), 2, -1):
        if ".".join(parts[:depth]) in ranked:
            return ".".join(parts[:depth])
    return ".".join(parts[:2])


def units(root: Path) -> set[str]:
    """The top-level modules and packages of ``root``, and ``saihm`` itself."""
    return {unit_of(name, {}) for name in modules(root)}


def _edges() -> list[Edge]:
    return [e for e in import_edges(ROOT) if (e.source, e.target) not in KNOWN_EXCEPTIONS]


def _show(cycle: list[str], where: Mapping[tuple[str, str], str]) -> str:
    steps = [f"{a} -> {b} ({where[a, b]})" for a, b in pairwise(cycle)]
    return "cycle: " + "; ".join(steps)


def test_every_package_and_top_level_module_has_a_layer() -> None:
    ranked = rank()
    listed = [unit for _, members in LAYERS for unit in members]
    assert len(listed) == len(set(listed)), "a unit is listed in two layers"
    unranked = sorted(units(ROOT) - set(ranked))
    assert not unranked, f"add to LAYERS in tests/test_layers.py: {unranked}"
    present = modules(ROOT)
    stale = sorted(u for u in ranked if u not in present)
    assert not stale, f"LAYERS names what no longer exists (remove it): {stale}"


def test_imports_point_down_the_layers() -> None:
    ranked = rank()
    bad = []
    for edge in _edges():
        source, target = unit_of(edge.source, ranked), unit_of(edge.target, ranked)
        if source in ranked and target in ranked and ranked[target] > ranked[source]:
            bad.append(
                f"{edge.where}: {edge.source} ({LAYERS[ranked[source]][0]!r}) imports "
                f"{edge.target} ({LAYERS[ranked[target]][0]!r})"
            )
    assert not bad, "\n".join(bad)


def test_no_import_cycle_between_modules() -> None:
    where = {(e.source, e.target): e.where for e in reversed(_edges())}
    found = cycles(where)
    assert not found, "\n".join(_show(c, where) for c in found)


def test_no_import_cycle_between_units() -> None:
    """Layers allow imports within a layer; between two units they must still go one way."""
    ranked = rank()
    where = {}
    for e in reversed(_edges()):
        source, target = unit_of(e.source, ranked), unit_of(e.target, ranked)
        if source != target:
            where[source, target] = f"{e.source} -> {e.target} at {e.where}"
    found = cycles(where)
    assert not found, "\n".join(_show(c, where) for c in found)


def test_known_exceptions_still_exist() -> None:
    present = {(e.source, e.target) for e in import_edges(ROOT)}
    gone = [f"{pair}: {why}" for pair, why in KNOWN_EXCEPTIONS.items() if pair not in present]
    assert not gone, "fixed: remove from KNOWN_EXCEPTIONS:\n" + "\n".join(gone)


# The checker itself, on a small package written for the purpose: it must find what it claims.


def _package(tmp: Path, files: Mapping[str, str]) -> Path:
    root = tmp / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_checker_finds_a_cycle_through_three_modules_and_a_function_level_import(
    tmp_path: Path,
) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg import b\n",
            "b.py": "def f():\n    from pkg.c import x\n",
            "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
            "d.py": "import pkg.a\n",
        },
    )
    edges = {(e.source, e.target) for e in import_edges(root)}
    assert edges == {("pkg.a", "pkg.b"), ("pkg.b", "pkg.c"), ("pkg.c", "pkg.a"), ("pkg.d", "pkg.a")}
    assert cycles(edges) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]
    assert cycles(edges - {("pkg.c", "pkg.a")}) == []


def test_checker_sees_imports_by_name_and_relative_imports(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "cli.py": (
                "import importlib\n"
                "def run(name):\n"
                "    _delegate('pkg.sub.tool', 'main')\n"
                "    importlib.import_module(f'pkg.bench.{name}')\n"
            ),
            "sub/__init__.py": "from .tool import main\n",
            "sub/tool.py": "from ..cli import run\nfrom .. import leaf\n",
            "bench/__init__.py": "",
            "leaf.py": "",
        },
    )
    edges = {(e.source, e.target) for e in import_edges(root)}
    assert edges == {
        ("pkg.cli", "pkg.sub.tool"),
        ("pkg.cli", "pkg.bench"),
        ("pkg.sub", "pkg.sub.tool"),
        ("pkg.sub.tool", "pkg.cli"),
        ("pkg.sub.tool", "pkg.leaf"),
    }
    assert cycles(edges) == [["pkg.cli", "pkg.sub.tool", "pkg.cli"]]


def test_a_unit_is_a_top_level_module_or_package_unless_ranked_apart() -> None:
    ranked = rank()
    assert unit_of("saihm.audit.mirror", ranked) == "saihm.audit"
    assert unit_of("saihm.services.witness", ranked) == "saihm.services"
    assert unit_of("saihm.witness.submit", ranked) == "saihm.witness"
    assert unit_of("saihm", ranked) == "saihm"
    assert unit_of("saihm.commands.main", ranked) == "saihm.commands"


# The independence rules of DESIGN.md "Layers", which the ranking alone does not express.


def _imports(path: Path) -> list[str]:
    """The distinct names a module of saihm imports, in first-seen order (:func:`imports_in`)."""
    return list(dict.fromkeys(name for name, _ in imports_in(path, ROOT, _saihm_modules())))


@functools.cache
def _saihm_modules() -> dict[str, Path]:
    return modules(ROOT)


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package.split(".")[1]).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down(package: str) -> None:
    bad = []
    for path in _files(package):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "saihm" and len(parts) > 1 and parts[1] in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", ["saihm.mcp", "saihm.client", "saihm.integrations"])
def test_mcp_client_does_no_cryptography_and_opens_no_store(package: str) -> None:
    bad = [
        f"{path.name} imports {name}"
        for path in _files(package)
        for name in _imports(path)
        if name.split(".")[0] in MCP_FORBIDDEN_THIRD_PARTY
    ]
    assert not bad, "\n".join(bad)


def test_the_protocol_edge_is_no_transport() -> None:
    """saihm.protocol parses and renders JSON for every caller; the HTTP transport (aiohttp)
    stays in saihm.http, so the bench and tests call the binding without a server."""
    bad = [
        f"{path.name} imports {name}"
        for path in _files("saihm.protocol")
        for name in _imports(path)
        if name.split(".")[0] == "aiohttp"
    ]
    assert not bad, "\n".join(bad)


def test_translog_verify_imports_nothing_of_saihm_but_the_error_root() -> None:
    path = ROOT / "translog" / "verify.py"
    assert [n for n in _imports(path) if n.split(".")[0] == "saihm"] == ["saihm.errors"]
    # ... and the error root is itself a leaf: verify.py and errors.py stand alone together.
    assert [n for n in _imports(ROOT / "errors.py") if n.split(".")[0] == "saihm"] == []


def test_the_configuration_reads_only_the_core() -> None:
    """``Config.for_data`` checks the origin and the witness strings with translog's parsers,
    so the configuration, which the store imports, imports nothing that imports the store."""
    names = [n for n in _imports(ROOT / "config.py") if n.split(".")[0] == "saihm"]
    assert names, "config.py imports its parsers"
    bad = [n for n in names if n != "saihm.errors" and not n.startswith("saihm.translog")]
    assert not bad, bad
