"""``saihm bench recall`` with a count that would measure nothing: one line, exit 2, no work.

Bad input gets "a one-line message and non-zero exit on the CLI" and changes nothing: no store
is built in the cache directory and no figure is printed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.serve import SAIHM


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--conversations", "0"], "--conversations must be at least 1, not 0"),
        (["--conversations", "-2", "--skip-latency"], "--conversations must be at least 1"),
        (["--samples", "0"], "--samples must be at least 1"),
        (["--cold", "0"], "--cold must be at least 1"),
        (["--workers", "0"], "--workers must be at least 1"),
        (["--sizes", "30,0"], "--sizes must be at least 1, not 0"),
        (["--sizes", "thirty"], "--sizes: not a comma-separated list of integers"),
        (["--sizes", ","], "--sizes: give at least one store size"),
        (["--cache-mb", "-1"], "--cache-mb must not be negative"),
    ],
)
def test_a_count_that_measures_nothing_is_one_line_and_does_no_work(
    tmp_path: Path, args: list[str], says: str
) -> None:
    cache = tmp_path / "cache"
    done = subprocess.run(
        [SAIHM, "bench", "recall", "--cache-dir", str(cache), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("saihm: error: ") and says in lines[0]
    assert "Traceback" not in done.stderr
    assert not cache.exists()
