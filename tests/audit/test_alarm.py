"""An alarm is a kind and a detail, printed as ``kind: detail`` (the monitor's and mirror's
output), and ``saihm verify`` files it as a failure of the check ``kind``. The kinds are an
enum of stable codes (``AlarmKind``), each listed in docs/operations.md "Alarms"."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from saihm.audit import report
from saihm.audit.report import Alarm, AlarmKind, Report

ROOT = Path(__file__).resolve().parents[2]


def test_an_alarm_prints_as_its_kind_then_its_detail() -> None:
    alarm = Alarm(AlarmKind.ROLLBACK, "checkpoint size 12 < held checkpoint size 13")
    assert str(alarm) == "rollback: checkpoint size 12 < held checkpoint size 13"
    assert f"ALARM: {alarm}" == "ALARM: rollback: checkpoint size 12 < held checkpoint size 13"


def test_an_alarm_whose_detail_holds_colons_keeps_its_kind() -> None:
    alarm = Alarm(AlarmKind.BAD_SIGNATURE, "the checkpoint does not verify: no key: x")
    assert str(alarm).split(":", 1)[0] == alarm.kind == "bad signature"
    assert str(alarm).split(":", 1)[1].strip() == alarm.detail


def test_the_kinds_keep_the_strings_the_json_carried() -> None:
    # The codes the free-text kinds were before the enum; only the prose one became a code.
    before = {"rollback", "fork", "bad signature", "root", "inconsistent", "stale", "witnesses"}
    assert before <= {kind.value for kind in AlarmKind}
    assert {kind.value for kind in AlarmKind} - before == {"unreachable"}
    failed = Report()
    failed.fail(Alarm(AlarmKind.FORK, "x").kind, "x")
    assert json.loads(json.dumps(failed.to_json()))["failures"][0]["check"] == "fork"


def test_a_kind_outside_the_enum_is_refused() -> None:
    with pytest.raises(ValueError):
        Alarm("unreachable or malformed answer", "down")  # type: ignore[arg-type]
    assert Alarm("fork", "x").kind is AlarmKind.FORK  # type: ignore[arg-type]


def _documented_kinds() -> set[str]:
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text.split("#### Alarms", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE))


def test_every_alarm_kind_is_documented_and_every_documented_kind_exists() -> None:
    assert _documented_kinds() == {kind.value for kind in AlarmKind}


def test_every_alarm_is_made_with_a_kind_of_the_enum() -> None:
    # Every construction site in saihm/ names its kind as AlarmKind.MEMBER, never a string.
    sites = 0
    for path in (ROOT / "saihm").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Alarm":
                sites += 1
                kind = node.args[0] if node.args else node.keywords[0].value
                assert isinstance(kind, ast.Attribute), f"{path}:{node.lineno}"
                assert getattr(kind.value, "id", None) == "AlarmKind", f"{path}:{node.lineno}"
                assert kind.attr in AlarmKind.__members__, f"{path}:{node.lineno}"
    assert sites >= len(AlarmKind)
    assert report.__all__.count("AlarmKind") == 1
