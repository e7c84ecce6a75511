"""``saihm verify``'s RESULT line says when the checkpoint keys were not pinned."""

from __future__ import annotations

from saihm.audit.report import UNPINNED_RESULT
from tests.support.cli import run_command


def test_without_trust_the_result_line_says_keys_were_not_pinned(world, capsys) -> None:
    assert run_command("verify", ["--data", str(world.data), "--no-progress"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == UNPINNED_RESULT and "NOT pinned" in last and "--trust" in last


def test_with_trust_the_result_line_is_plain_ok(world, capsys) -> None:
    argv = ["--data", str(world.data), "--trust", str(world.keys_file), "--no-progress"]
    assert run_command("verify", argv) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "RESULT: OK — every check held"
