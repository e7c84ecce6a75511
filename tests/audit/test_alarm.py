"""An alarm is a kind and a detail, printed as ``kind: detail`` (the monitor's and mirror's
output), and ``saihm verify`` files it as a failure of the check ``kind``."""

from __future__ import annotations

from saihm.audit.report import Alarm


def test_an_alarm_prints_as_its_kind_then_its_detail() -> None:
    alarm = Alarm("rollback", "checkpoint size 12 < held checkpoint size 13")
    assert str(alarm) == "rollback: checkpoint size 12 < held checkpoint size 13"
    assert f"ALARM: {alarm}" == "ALARM: rollback: checkpoint size 12 < held checkpoint size 13"


def test_an_alarm_whose_detail_holds_colons_keeps_its_kind() -> None:
    alarm = Alarm("bad signature", "the checkpoint does not verify: no key: x")
    assert str(alarm).split(":", 1)[0] == alarm.kind
    assert str(alarm).split(":", 1)[1].strip() == alarm.detail
