"""The ``saihm`` command line as data: every command path, each option's dest, nargs, type,
default, choices, required flag and help, and each command's ``--help`` text.

``python -m tests.cli.command_tree`` rewrites ``tests/fixtures/cli_tree.json``; do that only
for a deliberate change of the command line (DESIGN.md "Command line" is pinned).

The walk runs ``saihm COMMAND... --help`` in process and records the parser that answers it,
so it sees a command whatever the code that parses it (a subparser, or a parser of its own).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "cli_tree.json"

#: Commands no parser lists as a subcommand (parsed apart from their parent's parser).
EXTRA_PATHS = (("grant", "revoke"), ("witness", "serve"))
#: Commands whose arguments are passed on rather than pinned (``saihm bench NAME ...``).
NOT_WALKED = {("bench",)}
#: The terminal width the help text is formatted for.
COLUMNS = "100"


def _plain(value: object) -> object:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return repr(value)


def _type_name(kind: object) -> str | None:
    if kind is None:
        return None
    return str(getattr(kind, "__name__", type(kind).__name__))


def describe(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """What a user of ``parser`` can see and what its options parse into."""
    actions: list[dict[str, Any]] = []
    subcommands: dict[str, str | None] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                subcommands[choice.dest] = choice.help
            for name in action.choices:
                subcommands.setdefault(name, None)
            continue
        actions.append(
            {
                "kind": type(action).__name__,
                "options": list(action.option_strings),
                "dest": action.dest,
                "nargs": _plain(action.nargs),
                "type": _type_name(action.type),
                "default": _plain(action.default),
                "choices": _plain(None if action.choices is None else list(action.choices)),
                "required": action.required,
                "metavar": _plain(action.metavar),
                "help": action.help,
            }
        )
    return {
        "prog": parser.prog,
        "description": parser.description,
        "epilog": parser.epilog,
        "actions": actions,
        "subcommands": subcommands,
    }


def _run_help(main: Callable[[list[str]], int], path: tuple[str, ...]) -> dict[str, Any]:
    """``saihm PATH... --help``: its exit code, output and the parser that answered."""
    want = " ".join(("saihm", *path))
    seen: dict[str, Any] = {}
    real = argparse.ArgumentParser.parse_known_args

    def spy(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        if self.prog == want and "parser" not in seen:
            seen["parser"] = describe(self)
        return real(self, *args, **kwargs)

    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.object(argparse.ArgumentParser, "parse_known_args", spy),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code: object = main([*path, "--help"])
        except SystemExit as done:
            code = done.code
    return {
        "exit": code,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "parser": seen.get("parser"),
    }


@contextlib.contextmanager
def _clean_environment() -> Iterator[None]:
    """No SAIHM_* variable (``serve`` reads its defaults from them) and a fixed width."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("SAIHM_")}
    kept["COLUMNS"] = COLUMNS
    kept["LINES"] = "50"
    with mock.patch.dict(os.environ, kept, clear=True):
        yield


def walk(main: Callable[[list[str]], int]) -> dict[str, Any]:
    """Every command path of ``main`` (``""`` is ``saihm`` itself) and what ``--help`` shows."""
    tree: dict[str, Any] = {}
    todo: list[tuple[str, ...]] = [(), *EXTRA_PATHS]
    with _clean_environment():
        while todo:
            path = todo.pop(0)
            key = " ".join(path)
            if key in tree:
                continue
            tree[key] = node = _run_help(main, path)
            if node["parser"] is None or path in NOT_WALKED:
                continue
            todo.extend((*path, name) for name in node["parser"]["subcommands"])
    return dict(sorted(tree.items()))


def _main() -> None:
    from saihm.commands.main import main

    FIXTURE.write_text(json.dumps(walk(main), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    _main()
