"""Every data command with ``--store postgresql://...`` (DESIGN.md "Pinned additions for the
second round"): ``holder create``, ``session open``, ``grant``, ``kek rotate``, ``rebuild``,
``export``, ``verify --data DIR --store URL`` and ``publish`` work on a PostgreSQL store whose
data directory holds only node-local files, and agree with each other."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

from saihm.config import Config
from tests.support.postgres import base_url, fresh_location, with_settings
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


def _tables_in(location: str) -> int:
    with psycopg.connect(location, connect_timeout=10) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_data_directory_of_a_postgresql_store_refuses_another_store(
    tmp_path: Path, postgres_location: str
) -> None:
    """With --store naming another store (another schema, or the database's default one), a
    data command would open an empty store where `kek rotate` finds no wrapped key and
    retires every KEK the real store's DEKs are wrapped under: refused, nothing written
    anywhere (`saihm serve` too, which opens the store once before it starts). The same
    store under other connection settings is the same store."""
    data = tmp_path / "data"
    store = ["--data", str(data), "--store", postgres_location]
    with serving(tmp_path, *store) as (_, node):
        holder = json.loads(_ok("holder", "create", *store))
        assert post(node, holder["token"], "saihm_remember", {"content": "kept"})[0] == 200
    kek_dir = Config.for_data(data).kek_dir
    kek = sorted(p.name for p in kek_dir.rglob("*"))
    password = urlsplit(postgres_location).password
    default_schema = base_url()
    assert default_schema is not None
    with fresh_location() as other:
        for wrong in (other, default_schema):
            for argv in (["kek", "rotate"], ["holder", "create"], ["serve", "--port", "0"]):
                done = subprocess.run(
                    [SAIHM, *argv, "--data", str(data), "--store", wrong],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert done.returncode != 0 and done.stdout == ""
                lines = done.stderr.strip().splitlines()
                assert len(lines) == 1 and "--store" in lines[0], done.stderr
                assert "Traceback" not in done.stderr
                assert not password or password not in done.stderr
        assert _tables_in(other) == 0, "nothing was created in the other store"
    assert sorted(p.name for p in kek_dir.rglob("*")) == kek, "no KEK was retired"

    # The right store, with a node's own settings in its URL: accepted, and the cell written
    # before the rotation still opens under the new KEK.
    same = with_settings(postgres_location, lock_timeout="2s")
    assert json.loads(_ok("kek", "rotate", "--data", str(data), "--store", same))["kekVersion"]
    with serving(tmp_path, *store) as (_, node):
        status, cells = post(node, holder["token"], "saihm_recall", {})
        assert status == 200 and [c["plaintext"] for c in cells] == ["kept"]
