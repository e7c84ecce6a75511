"""Every data command with ``--store postgresql://...`` (DESIGN.md "Pinned additions for the
second round"): ``holder create``, ``session open``, ``grant``, ``kek rotate``, ``rebuild``,
``export``, ``verify --data DIR --store URL`` and ``publish`` work on a PostgreSQL store whose
data directory holds only node-local files, and agree with each other."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from saihm.config import Config
from tests.support.serve import SAIHM, post, serving


def _ok(*argv: str) -> str:
    done = subprocess.run([SAIHM, *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_data_commands_work_on_a_postgresql_store(
    tmp_path: Path, postgres_location: str
) -> None:
    url = postgres_location
    data = tmp_path / "data"
    store = ["--data", str(data), "--store", url]
    with serving(tmp_path, *store) as (_, node):
        holder = json.loads(_ok("holder", "create", *store))
        session = json.loads(_ok("session", "open", *store, "--holder", holder["holderId"]))
        assert post(node, holder["token"], "saihm_remember", {"content": "first"})[0] == 200
        assert post(node, session["token"], "saihm_remember", {"content": "second"})[0] == 200
        grant = json.loads(
            _ok("grant", *store, "--holder", holder["holderId"], "--sessions", "all")
        )
        status, cells = post(node, grant["token"], "saihm_recall", {})
        assert status == 200 and sorted(c["plaintext"] for c in cells) == ["first", "second"]
        version = json.loads(_ok("kek", "rotate", *store))["kekVersion"]
        assert version == 2
        # The DEKs re-wrapped in the database under the new KEK (the old one destroyed) still
        # open every cell, through the running server whose cache the rotation cleared.
        status, cells = post(node, grant["token"], "saihm_recall", {})
        assert status == 200 and sorted(c["plaintext"] for c in cells) == ["first", "second"]
    assert not (data / "lmdb").exists(), "nothing of the store is in the data directory"
    rebuilt = json.loads(_ok("rebuild", *store))
    assert rebuilt["identical"] is True and rebuilt["events"] > 0
    bundle = tmp_path / "bundle.cbor"
    exported = json.loads(_ok("export", *store, "--out", str(bundle)))
    assert exported["leaves"] == rebuilt["events"]
    assert json.loads(_ok("verify", str(bundle), "--json", "--no-progress"))["ok"] is True
    assert json.loads(_ok("verify", *store, "--json", "--no-progress"))["ok"] is True
    published = json.loads(_ok("publish", *store, "--to", str(tmp_path / "out")))
    assert published and (tmp_path / "out" / "checkpoint").is_file()
    assert json.loads(_ok("verify", str(tmp_path / "out"), "--json", "--no-progress"))["ok"]


def test_a_data_directory_of_a_postgresql_store_refuses_to_open_without_it(
    tmp_path: Path, postgres_location: str
) -> None:
    """Without --store, a data command on the directory would open an empty LMDB beside the
    real store, where `kek rotate` finds no wrapped key and retires every KEK: refused."""
    data = tmp_path / "data"
    store = ["--data", str(data), "--store", postgres_location]
    with serving(tmp_path, *store):
        holder = json.loads(_ok("holder", "create", *store))
    kek_dir = Config.for_data(data).kek_dir
    kek = sorted(p.name for p in kek_dir.rglob("*"))
    assert kek, "the KEK directory holds the keys"
    password = urlsplit(postgres_location).password
    for argv in (["kek", "rotate"], ["session", "open", "--holder", holder["holderId"]]):
        done = subprocess.run(
            [SAIHM, *argv, "--data", str(data)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode != 0 and done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "--store" in lines[0], done.stderr
        assert "Traceback" not in done.stderr
        assert not password or password not in done.stderr
    assert not (data / "lmdb").exists(), "no empty LMDB store was created"
    assert sorted(p.name for p in kek_dir.rglob("*")) == kek, "no KEK was retired"
