"""The README and docs/ point only at files in this repository, and those files exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: Backticked paths that name a file of the repository (``tests/x.py::test_y`` included).
PATH = re.compile(r"`((?:\.\./|docs/|tests/|saihm/|deploy/|tools/|spec/|\.ci/)[^`\s]*)`")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_link_is_a_file_of_the_repository(doc: Path) -> None:
    for target in LINK.findall(doc.read_text()):
        if target.startswith("#"):
            continue
        assert "://" not in target, f"{doc.name} links outside the repository: {target}"
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"{doc.name}: {target}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_named_path_exists(doc: Path) -> None:
    for named in PATH.findall(doc.read_text()):
        file, _, test = named.partition("::")
        path = (ROOT / file.rstrip("/")).resolve()
        assert path.is_relative_to(ROOT), f"{doc.name} names a file outside the repository: {named}"
        if any(c in file for c in "*<>{}") or file.endswith("/..."):
            continue
        assert path.exists(), f"{doc.name}: {named}"
        if test:
            assert f"def {test}(" in path.read_text(), f"{doc.name}: {named}"
