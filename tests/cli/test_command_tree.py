"""DESIGN.md "Command line" is pinned: every command, option, dest, type, default, choice and
help text of ``saihm`` (and each command's ``--help``) equals the fixture taken before the
command line was re-housed in ``saihm/commands/`` (tests/cli/command_tree.py)."""

from __future__ import annotations

import json

import pytest

from saihm.commands.main import main
from tests.cli.command_tree import FIXTURE, walk


@pytest.fixture(scope="module")
def tree() -> dict[str, object]:
    return walk(main)


def test_every_pinned_command_path_is_still_there(tree: dict[str, object]) -> None:
    assert sorted(tree) == sorted(json.loads(FIXTURE.read_text()))


def test_every_command_parses_and_helps_as_pinned(tree: dict[str, object]) -> None:
    pinned = json.loads(FIXTURE.read_text())
    changed = [path for path in pinned if tree.get(path) != pinned[path]]
    assert not changed, f"commands whose options or --help changed: {changed}"
    assert tree == pinned
