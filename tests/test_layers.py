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

#: A table of floors: (what stands there, its units), bottom first.
Layers = tuple[tuple[str, tuple[str, ...]], ...]

#: The floors, bottom first. A unit is a top-level module or a package of saihm (``saihm`` is
#: the package's own ``__init__``), never a sub-module: the files inside a package are kept in
#: order by :func:`test_no_import_cycle_between_modules` alone. A unit may import units of its
#: own floor or below; never above. docs/internals.md "Floors" is this table in words.
LAYERS: Layers = (
    (
        "shared leaves: import nothing of saihm but each other",
        ("saihm", "saihm.errors", "saihm.names", "saihm.mldsa", "saihm.logs"),
    ),
    (
        "the core: the log, the signed events, the storage drivers, ranking, the client library",
        ("saihm.translog", "saihm.events", "saihm.storage", "saihm.retrieval", "saihm.client"),
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
    ("the store: the one writer and the checked read path", ("saihm.store",)),
    (
        "over the store: the operator's parts, the authority's key, actions and person records, "
        "and the tools run against a stopped store's files",
        ("saihm.operator", "saihm.authority", "saihm.offline"),
    ),
    ("the composition root", ("saihm.compose",)),
    ("the protocol's JSON edge: params, recall window, renderers, bindings", ("saihm.protocol",)),
    (
        "the edges: HTTP, the provider, and the long-running services",
        ("saihm.http", "saihm.provider", "saihm.services"),
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
    # needs of them (the authority seed's file name, for backups) comes from saihm.config. Its
    # offline tools stand above it and take what they need from it, never the reverse.
    "saihm.store": {
        "authority",
        "operator",
        "offline",
        "protocol",
        "http",
        "provider",
        "witness",
        "mcp",
        "audit",
        "commands",
        "bench",
    },
    # The tools run against a stopped store's files (fsck, backup, migrate) need the store and
    # its floors, never a running operator, its edges or the verifier they are checked beside.
    "saihm.offline": {
        "compose",
        "operator",
        "authority",
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


def rank(layers: Layers = LAYERS) -> dict[str, int]:
    """Each unit of ``layers`` and its floor number (0 at the bottom)."""
    return {unit: level for level, (_, units) in enumerate(layers) for unit in units}


def unit_of(module: str) -> str:
    """The unit ``module`` belongs to: its top-level module or package
    (``saihm.audit.mirror`` -> ``saihm.audit``; ``saihm`` is itself)."""
    return ".".join(module.split(".")[:2])


def units(root: Path) -> set[str]:
    """The top-level modules and packages of ``root``, and ``root``'s own name."""
    return {unit_of(name) for name in modules(root)}


def upward_imports(edges: Iterable[Edge], layers: Layers) -> list[str]:
    """Each of ``edges`` whose target's unit stands on a higher floor of ``layers`` than its
    source's, described for a failure message."""
    ranked = rank(layers)
    bad = []
    for edge in edges:
        source, target = unit_of(edge.source), unit_of(edge.target)
        if source in ranked and target in ranked and ranked[target] > ranked[source]:
            bad.append(
                f"{edge.where}: {edge.source} ({layers[ranked[source]][0]!r}) imports "
                f"{edge.target} ({layers[ranked[target]][0]!r})"
            )
    return bad


def unit_edges(edges: Iterable[Edge]) -> dict[tuple[str, str], str]:
    """The imports between units, each with the first module import that makes it."""
    where: dict[tuple[str, str], str] = {}
    for e in reversed(list(edges)):
        source, target = unit_of(e.source), unit_of(e.target)
        if source != target:
            where[source, target] = f"{e.source} -> {e.target} at {e.where}"
    return where


def room_edges(edges: Iterable[Edge]) -> dict[tuple[str, str], str]:
    """The imports between the rooms of every package: for ``a.b.x -> a.c.y`` the rooms
    ``a.b`` and ``a.c`` of package ``a``, at any depth (``saihm.store.auth`` and
    ``saihm.store.read``), each with the first module import that makes it. A package's own
    ``__init__`` importing its rooms (its front) is not between two rooms."""
    where: dict[tuple[str, str], str] = {}
    for e in reversed(list(edges)):
        source, target = e.source.split("."), e.target.split(".")
        common = 0
        while common < min(len(source), len(target)) and source[common] == target[common]:
            common += 1
        if 1 <= common < min(len(source), len(target)):
            rooms = ".".join(source[: common + 1]), ".".join(target[: common + 1])
            where[rooms] = f"{e.source} -> {e.target} at {e.where}"
    return where


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


def test_the_table_ranks_packages_never_sub_modules() -> None:
    """A sub-module ranked apart from its package is a package spanning two floors: move the
    module to the package where it belongs instead."""
    apart = [unit for _, members in LAYERS for unit in members if unit_of(unit) != unit]
    assert not apart, f"rank the package, not its module: {apart}"


def test_imports_point_down_the_layers() -> None:
    bad = upward_imports(_edges(), LAYERS)
    assert not bad, "\n".join(bad)


def test_no_import_cycle_between_modules() -> None:
    """What keeps the files inside a package in order, since the table ranks only packages."""
    where = {(e.source, e.target): e.where for e in reversed(_edges())}
    found = cycles(where)
    assert not found, "\n".join(_show(c, where) for c in found)


def test_no_import_cycle_between_units() -> None:
    """Layers allow imports within a layer; between two units they must still go one way."""
    where = unit_edges(_edges())
    found = cycles(where)
    assert not found, "\n".join(_show(c, where) for c in found)


def test_no_import_cycle_between_the_rooms_of_a_package() -> None:
    """Inside a package, a sub-package and its sibling modules import one way too (farm-studio
    draws a folder as one room: ``store/auth.py`` importing ``store/read/`` while ``store/read/``
    imports ``store/auth.py`` is an arrow back up, though no two files import each other)."""
    where = room_edges(_edges())
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


def test_a_unit_is_a_top_level_module_or_package() -> None:
    assert unit_of("saihm.audit.mirror") == "saihm.audit"
    assert unit_of("saihm.services.witness") == "saihm.services"
    assert unit_of("saihm.store.read.reader") == "saihm.store"
    assert unit_of("saihm.offline.fsck") == "saihm.offline"
    assert unit_of("saihm") == "saihm"
    assert unit_of("saihm.config") == "saihm.config"


def test_checker_finds_an_upward_import_between_packages(tmp_path: Path) -> None:
    """The floor check on a package written for the purpose: one function-level import from a
    module of the low package into a sub-module of the high one is found, with where it is; a
    unit cycle follows from it; without it, nothing is found."""
    files = {
        "__init__.py": "",
        "leaf.py": "",
        "low/__init__.py": "from pkg import leaf\n",
        "low/part.py": "from pkg import leaf\n",
        "high/__init__.py": "from pkg.low import part\n",
        "high/deep/__init__.py": "",
        "high/deep/tool.py": "import pkg.low\n",
    }
    layers: Layers = (
        ("bottom", ("pkg", "pkg.leaf")),
        ("low", ("pkg.low",)),
        ("high", ("pkg.high",)),
    )
    clean = import_edges(_package(tmp_path / "clean", files))
    assert upward_imports(clean, layers) == []
    assert cycles(unit_edges(clean)) == []

    files["low/part.py"] += "def f():\n    from pkg.high.deep.tool import x\n"
    edges = import_edges(_package(tmp_path / "upward", files))
    assert upward_imports(edges, layers) == [
        "pkg/low/part.py:3: pkg.low.part ('low') imports pkg.high.deep.tool ('high')"
    ]
    assert cycles(unit_edges(edges)) == [["pkg.high", "pkg.low", "pkg.high"]]
    # Ranked on one floor, the two may import each other as far as the floors go (the unit
    # cycle check, which knows no floors, still finds the loop above).
    flat: Layers = (("bottom", ("pkg", "pkg.leaf")), ("one", ("pkg.low", "pkg.high")))
    assert upward_imports(edges, flat) == []


def test_checker_finds_a_cycle_between_a_sub_package_and_a_sibling_module(tmp_path: Path) -> None:
    """No two files import each other, but the sub-package ``read`` and its sibling ``auth``
    do: the room check finds it; the module check does not."""
    files = {
        "__init__.py": "",
        "store/__init__.py": "from pkg.store import auth, read\n",
        "store/auth.py": "from pkg.store.read.views import Header\n",
        "store/read/__init__.py": "",
        "store/read/views.py": "Header = int\n",
        "store/read/reader.py": "from pkg.store.auth import x\n",
    }
    edges = import_edges(_package(tmp_path / "loop", files))
    assert cycles({(e.source, e.target) for e in edges}) == []
    assert cycles(room_edges(edges)) == [["pkg.store.auth", "pkg.store.read", "pkg.store.auth"]]
    files["store/auth.py"] = "x = 1\n"
    assert cycles(room_edges(import_edges(_package(tmp_path / "clean", files)))) == []


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
