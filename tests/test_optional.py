"""tests/support/optional.require_module: an optional test dependency skips locally and fails
under CI=true (issue 32, item 11)."""

from __future__ import annotations

import json

import pytest

from tests.support.optional import require_module

MISSING = "saihm_no_such_module_for_this_test"


def test_a_present_module_is_returned() -> None:
    assert require_module("json", "test") is json


def test_a_missing_module_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=rf"{MISSING} is not installed.*saihm\[s3\]"):
        require_module(MISSING, "s3")


def test_a_missing_module_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=rf"CI=true but {MISSING} is not installed"):
        require_module(MISSING, "s3")
