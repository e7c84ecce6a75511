"""The generic tamper test (issue 11, Build 3): every named LMDB database, four raw edits.

For every named database of a populated store (two holders and a third, sessions, grants, a
withdrawn grant, a revoked session, a shared accepted contract, forgotten cells, pending
proposals) each of flip-a-byte, delete-a-key, swap-two-values and drop-the-last-key is made with
raw LMDB writes, on keys chosen by a seeded generator. Each edit must be detected by
``saihm verify --data`` (non-zero exit with a finding) or leave every token's recall unchanged,
and no edit may ever let a token see a plaintext it could not see before. The edit is undone
before the next one.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import lmdb
import pytest

from saihm.commands import main as cli
from tests.support.postgres import lmdb_only

from .damage import LmdbRaw, Verdicts, random_edits
from .populated import Populated, named_databases, populate

pytestmark = lmdb_only("its raw edits open DATA/lmdb with lmdb.open")

OPS = ("flip", "delete", "swap", "drop_last")
SEED = 11


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Populated:
    p = populate(tmp_path_factory.mktemp("tamper"))
    p.baseline = p.views()  # type: ignore[attr-defined]
    p.world.store.close()
    return p


def _write(env: lmdb.Environment, name: bytes, changes: list) -> list:
    """Apply ``changes``; return what undoes them."""
    db = env.open_db(name)
    undo = []
    with env.begin(write=True) as txn:
        for key, value in changes:
            old = txn.get(key, db=db)
            undo.append((key, None if old is None else bytes(old)))
            if value is None:
                txn.delete(key, db=db)
            else:
                txn.put(key, value, db=db)
    return undo


def _verify(capsys: pytest.CaptureFixture, data: Path) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli.main(["verify", "--data", str(data), "--json", "--no-progress"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_every_raw_edit_of_every_database_is_detected_or_harmless(populated, capsys) -> None:
    p = populated
    data = p.world.config.data_dir
    code, report = _verify(capsys, data)
    assert code == 0, report.get("failures")
    env = lmdb.open(str(p.world.config.lmdb_dir), max_dbs=64, map_size=p.world.config.map_size)
    try:
        raw = LmdbRaw(env)
        tables = [(name, rows) for name in named_databases(env) if (rows := raw.rows(name))]
        edits = random_edits(tables, random.Random(SEED))
    finally:
        env.close()
    verdicts = Verdicts(p.baseline)  # type: ignore[attr-defined]
    for name, op, changes in edits:
        env = lmdb.open(str(p.world.config.lmdb_dir), max_dbs=64, map_size=p.world.config.map_size)
        try:
            undo = _write(env, name, changes)
        finally:
            env.close()
        try:
            code, report = _verify(capsys, data)
            views = p.views_reopened()
        finally:
            env = lmdb.open(
                str(p.world.config.lmdb_dir), max_dbs=64, map_size=p.world.config.map_size
            )
            try:
                _write(env, name, undo)
            finally:
                env.close()
        verdicts.judge(name, op, code, report, views)
    counts, harmless = verdicts.counts, verdicts.harmless
    print(f"\ngeneric tamper: {len(edits)} edits: {dict(counts)}; harmless: {harmless}")
    assert verdicts.undetected == []
    assert counts["detected"] > 0
    # Every database with records was edited every applicable way.
    assert {op for _, op, _ in edits} == set(OPS)
