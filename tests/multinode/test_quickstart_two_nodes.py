"""The README quickstart, as written, against two ``saihm serve --store postgresql://...``
server processes on one database (issue 16, Build 4): the script runs through node A, then
again through node B, and each node's public log holds what was written through the other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.http.test_serve import readme_block
from tests.support.serve import fetch, serving


def _run(script: str, url: str, cwd: Path, store: str) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script.replace("http://127.0.0.1:8080", url[:-1])],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SAIHM_STORE": store},
    )
    assert done.returncode == 0, done.stderr
    assert "The user prefers green tea." in done.stdout and "Traceback" not in done.stdout
    return done.stdout


def test_readme_quickstart_runs_against_two_nodes_of_one_postgresql_store(
    tmp_path: Path, postgres_location: str
) -> None:
    script = readme_block("quickstart")
    assert script.count("http://127.0.0.1:8080") == 1
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env = {"SAIHM_STORE": postgres_location}
    with (
        serving(tmp_path, "--data", "./saihm-data", env=env, name="a") as (_, url_a),
        serving(tmp_path, "--data", "./saihm-data", env=env, name="b") as (_, url_b),
    ):
        outputs = [_run(script, url, tmp_path, postgres_location) for url in (url_a, url_b)]
        erased = [json.loads(out.strip().splitlines()[-1])["cellIds"] for out in outputs]
        # The second run's erasure list (through B) holds both cells: one log, one list.
        assert len(erased[0]) == 1 and set(erased[0]) < set(erased[1]) and len(erased[1]) == 2
        for cell in erased[1]:
            for node in (url_a, url_b):
                status, raw = fetch(node + f"log/v1/receipts?subjectId={cell}")
                receipts = json.loads(raw)["receipts"]
                assert status == 200
                assert [r["receipt"]["operation"] for r in receipts] == ["REMEMBER", "FORGET"]
    assert not (tmp_path / "saihm-data" / "lmdb").exists(), "nothing went to LMDB"
