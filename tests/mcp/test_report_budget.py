"""The recall report stays within a budget (docs/mcp.md "Report budget"): beyond it the client
says how many cells were not printed and how to narrow the recall; it never truncates an
identifier, never drops a cell without saying so, and its structured result keeps every cell."""

from __future__ import annotations

import re

import pytest

from saihm.mcp.config import DEFAULT_REPORT_BUDGET, ConfigError, load_config
from saihm.mcp.report import render
from saihm.mcp.results import check_recall_result

OWN = "ab" * 32


def cells(n: int, size: int) -> list[dict]:
    return [
        {"cellId": f"{i:064x}", "plaintext": f"cell {i} " + "w" * size, "holderIdHex": OWN}
        for i in range(n)
    ]


@pytest.mark.parametrize("budget", [1_000, 5_000, DEFAULT_REPORT_BUDGET])
def test_a_long_recall_stays_within_the_budget_and_says_what_it_left_out(budget: int) -> None:
    body = cells(4000, 400)  # about 1.9 MB, as in the issue
    result = check_recall_result(body, None, OWN)
    report = render(result, budget)
    assert len(report) <= budget
    printed = re.findall(r"^\[([0-9a-f]+)\]( cell \d+ w+)?$", report, flags=re.M)
    printed = [cell_id for cell_id, _ in printed]
    # Each cell is listed whole by its full cellId (saihm-protocol "Result identifiers").
    assert printed == [c["cellId"] for c in body[: len(printed)]]
    match = re.search(r"NOT PRINTED: (\d+) of 4000 cell\(s\)", report)
    assert match and int(match[1]) == 4000 - len(printed)
    assert "query about the task at hand" in report
    assert len(result.model_dump(mode="json")["cells"]) == 4000  # the structured result


def test_a_short_recall_prints_every_cell_and_no_notice() -> None:
    report = render(check_recall_result(cells(3, 20), None, OWN))
    assert len(re.findall(r"^\[[0-9a-f]{64}\] cell \d", report, flags=re.M)) == 3
    assert "NOT PRINTED" not in report


def test_a_cell_longer_than_the_budget_is_listed_without_its_text() -> None:
    body = [{"cellId": "e" * 64, "plaintext": "z" * 50_000, "holderIdHex": OWN}, *cells(2, 10)]
    report = render(check_recall_result(body, None, OWN), 2_000)
    assert len(report) <= 2_000
    assert f"\n[{'e' * 64}]\n    (text not printed" in report
    assert "z" * 100 not in report
    assert "1 cell(s) above are listed without their text" in report
    assert len(re.findall(r"^\[[0-9a-f]{64}\]", report, flags=re.M)) == 3


def test_the_budget_is_configurable() -> None:
    assert load_config({}).report_budget == DEFAULT_REPORT_BUDGET
    assert load_config({"SAIHM_REPORT_BUDGET": "5000"}).report_budget == 5000
    for bad in ("0", "999", "-5", "lots", "1e6", "99999999999"):
        with pytest.raises(ConfigError):
            load_config({"SAIHM_REPORT_BUDGET": bad})
