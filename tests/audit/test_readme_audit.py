"""The README's "Audit it without trusting it" block runs as written, after the quickstart.

Like tests/http/test_serve.py does for the quickstart: a real ``saihm serve`` subprocess on a
free port, the README's blocks run by bash with that port in place of 8080, in a fresh
directory holding nothing but the venv. Every file the audit block names must therefore be
produced by an earlier line of the README.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.serve import ROOT, serving


def readme_block(tag: str) -> str:
    blocks = re.findall(r"```sh " + tag + r"\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) == 1, f"README.md needs exactly one ```sh {tag} block"
    return blocks[0]


def test_readme_audit_block_runs_as_written(tmp_path: Path) -> None:
    quickstart, audit = readme_block("quickstart"), readme_block("audit")
    assert audit.count("http://127.0.0.1:8080") == 1
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    with serving(tmp_path, "--data", "./saihm-data") as (_, url):
        outputs = []
        for script in (quickstart, audit):
            done = subprocess.run(
                [
                    "bash",
                    "-euo",
                    "pipefail",
                    "-c",
                    script.replace("http://127.0.0.1:8080", url[:-1]),
                ],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            outputs.append(done.stdout)
    out = outputs[1]
    assert "Traceback" not in out and "ALARM" not in out
    # Two verifications of the log over HTTP and of the publication, one of the bundle.
    assert out.count("RESULT: OK") == 3 and "checkpoint keys   pinned (--trust)" in out
    assert "held checkpoints  1" in out
    # The mirror holds the whole log the quickstart wrote (a KEY receipt at least, then its
    # calls), and the publication has the partial entry bundle of exactly that size.
    size = int((tmp_path / "mirror" / "checkpoint").read_bytes().split(b"\n")[1])
    assert 4 <= size < 256
    assert (tmp_path / "public" / "tile" / "entries" / "000.p" / str(size)).is_file()
    assert (tmp_path / "replay").is_dir()
    # The researcher's dataset from the URL alone: one events row per leaf of the log.
    events = (tmp_path / "study" / "events.csv").read_text().splitlines()
    assert len(events) - 1 >= size
