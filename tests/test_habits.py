"""Habits the repository keeps (issue 12, "Habits"), checked so that they stay kept.

- The formatter wins: no skip marker and no off/on pair of ruff format in saihm/ or tests/.
- The tests read nothing outside the repository: a clone in any directory collects and runs
  (the public vectors are copied into tests/vectors with their source and licence).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Files excused from the formatter rule: none since the splits landed; the set stays empty.
EXCUSED: frozenset[str] = frozenset()

_MARKER = re.compile(r"#\s*fmt:\s*(skip|off|on)\b")
# Paths that would only resolve on the machine the project was first written on.
# Spelled in pieces, like the marker test below, so that a scan for such paths does not take
# this file for a test that reads them.
_SHARED = "sha" + "red"
_OUTSIDE = re.compile(rf"\.\./{_SHARED}|/work/{_SHARED}|{_SHARED}/vectors")


def _sources(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py"))


def _hits(pattern: re.Pattern[str], paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_no_formatter_markers_outside_the_files_being_split() -> None:
    paths = [p for p in _sources("saihm", "tests") if str(p.relative_to(ROOT)) not in EXCUSED]
    assert _hits(_MARKER, paths) == []


def test_the_marker_pattern_finds_every_spelling() -> None:
    # Spelled in pieces so that a plain grep for the markers does not find this file.
    fmt = "fmt" + ":"
    for line in (f"x = 1  # {fmt} skip", f"# {fmt} off", f"#{fmt}on", f"y = (1,)  #  {fmt}  skip"):
        assert _MARKER.search(line), line
    assert not _MARKER.search("# format: skip the rest")


def test_tests_read_nothing_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    assert _hits(_OUTSIDE, [p for p in _sources("tests") if p != this]) == []


def test_every_vector_set_names_its_source_and_licence() -> None:
    vectors = ROOT / "tests" / "vectors"
    readme = (vectors / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    named = {row.split("`")[1].split("/")[0] for row in rows}
    on_disk = {p.name for p in vectors.iterdir() if p.name != "README.md"}
    assert on_disk <= named, sorted(on_disk - named)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 4 and all(cells), row  # folder, origin, licence, what
