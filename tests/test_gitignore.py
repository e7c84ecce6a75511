"""What the README's blocks write in the clone is ignored by git (issue #32 item 9), so a
newcomer who follows the README sees a clean ``git status``; the package's own directories of
the same names are not."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Paths the README's blocks create in the clone: the quickstart (``make run``), "Add memory to
#: your agent" (``> .mcp.json``) and "Audit it without trusting it" (the pinned keys, the
#: mirror, the publication, the bundle and the replay).
WRITTEN = [
    "saihm-data/lmdb/data.mdb",
    "kek/kek-1.key",
    "authority/authority.seed",
    ".mcp.json",
    "log-keys.txt",
    "mirror/checkpoint",
    "public/tile/0/000",
    "audit.saihm",
    "replay/cells.json",
]


def _git() -> str:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("git and a checkout are needed to check .gitignore")
        pytest.skip("not a git checkout")
    return git


def test_what_the_readme_writes_in_the_clone_is_ignored() -> None:
    done = subprocess.run(
        [_git(), "-C", str(ROOT), "check-ignore", "--no-index", *WRITTEN],
        capture_output=True,
        text=True,
    )
    assert sorted(done.stdout.split()) == sorted(WRITTEN), done.stderr


def test_the_packages_own_files_are_not_ignored() -> None:
    tracked = ["saihm/authority/authority.py", "saihm/audit/mirror.py", "saihm/audit/replay.py"]
    done = subprocess.run(
        [_git(), "-C", str(ROOT), "check-ignore", "--no-index", *tracked],
        capture_output=True,
        text=True,
    )
    assert done.stdout == "" and done.returncode == 1
