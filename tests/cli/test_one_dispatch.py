"""Issue #22 item 1: the command line lives in saihm/commands, in one style. Each family module
has ``register(commands)``; every command the ``saihm`` tree can reach sets ``run(args)``;
and no module outside saihm/commands parses a command line or takes an argparse namespace."""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from pathlib import Path

from saihm.commands import main as commands_main

PACKAGE = Path(commands_main.__file__).resolve().parents[1]
#: Modules outside saihm/commands that still parse options of their own, and why.
OWN_PARSERS = {
    "saihm/mcp/__init__.py": "the saihm-mcp console script (a separate entry point)",
}
#: The benchmarks parse the options ``saihm bench NAME ...`` passes on, unpinned.
OWN_PARSERS_PREFIX = "saihm/bench/"


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """Every command path under ``parser`` that no further subcommand follows, with the
    parser of each path checked on the way (its routes included)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    routes = getattr(parser, "routes", {})
    for word, routed in routes.items():
        yield from _leaves(routed, (*path, word))
    if not subs:
        yield path
        return
    for action in subs:
        for name, child in action.choices.items():
            yield from _leaves(child, (*path, name))


def _parser_of(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands_main.build_parser()
    for word in path:
        routes = getattr(parser, "routes", {})
        if word in routes:
            parser = routes[word]
            continue
        (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = action.choices[word]
    return parser


def test_every_command_sets_run() -> None:
    leaves = list(_leaves(commands_main.build_parser(), ()))
    assert ("grant", "revoke") in leaves and ("verify",) in leaves and len(leaves) > 30
    missing = [" ".join(p) for p in leaves if not callable(_parser_of(p).get_default("run"))]
    assert not missing, f"commands without a run handler: {missing}"


def test_every_family_module_registers_itself() -> None:
    for family in commands_main.FAMILIES:
        assert callable(getattr(family, "register", None)), family.__name__


def _argparse_uses(tree: ast.Module) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names)) or (
            isinstance(node, ast.ImportFrom) and node.module == "argparse"
        ):
            lines.append(node.lineno)
    return lines


def test_only_the_command_line_imports_argparse() -> None:
    """Library code takes typed options (frozen dataclasses), never an argparse namespace."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = "saihm/" + path.relative_to(PACKAGE).as_posix()
        if rel.startswith(("saihm/commands/", OWN_PARSERS_PREFIX)) or rel in OWN_PARSERS:
            continue
        lines = _argparse_uses(ast.parse(path.read_text(encoding="utf-8"), filename=rel))
        bad += [f"{rel}:{line}" for line in lines]
    assert not bad, f"argparse outside saihm/commands: {bad}"


def test_the_top_level_holds_only_the_shared_modules() -> None:
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top - {"cellcache", "jobs", "origin"} <= {
        "__init__",
        "errors",
        "names",
        "mldsa",
        "logs",
        "config",
        "compose",
    }
