"""``saihm verify --data`` checks the operator's private state, ``saihm rebuild --replace``
repairs the projections, and the store refuses to serve projections that lag the log
(issue 11, Build 3; docs/operations.md "What verify --data checks")."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import lmdb
import pytest

from saihm.commands import main as cli
from saihm.offline.fsck import check_store
from saihm.projections import apply as PJ
from saihm.protocol import call as binding_call
from saihm.store import StaleProjections, Store
from tests.support.postgres import lmdb_only

from ..support.serve import SAIHM
from .damage import DAMAGE, flip, lagging_applied_index, lmdb_raw
from .populated import Populated, clone, populate, reopened

pytestmark = lmdb_only(
    "raw edits through lmdb.open, and `saihm verify --data`, whose public checks "
    "(saihm/audit/datadir.py) read DATA/lmdb only"
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Populated, Path]:
    root = tmp_path_factory.mktemp("fsck")
    p = populate(root)
    p.baseline = p.views()  # type: ignore[attr-defined]
    p.world.store.close()
    return p, root


@pytest.fixture
def populated(template: tuple[Populated, Path], tmp_path: Path) -> Populated:
    p = clone(*template, tmp_path / "copy")
    yield p
    with contextlib.suppress(lmdb.Error):  # some tests close it themselves
        p.world.store.close()


def _verify(capsys, p: Populated) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli.main(["verify", "--data", str(p.world.config.data_dir), "--json", "--no-progress"])
    return code, json.loads(capsys.readouterr().out)


def _private(report: dict) -> list[dict]:
    return [f for f in report["failures"] if "database" in f]


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_verify_data_names_the_database_key_and_check_of_private_damage(populated, name, capsys):
    p = populated
    damage, database, cell, check = DAMAGE[name]
    p.world.store.close()
    with lmdb_raw(p.world.config) as raw:
        damage(p, raw)
    code, report = _verify(capsys, p)
    assert code == 1
    found = [f for f in _private(report) if f["database"] == database and f["check"] == check]
    assert found, _private(report)
    if cell:
        assert any(f["key"] == p.cells[cell].hex() for f in found)


def test_verify_data_passes_on_an_untouched_populated_store(populated, capsys):
    p = populated
    p.world.store.close()
    code, report = _verify(capsys, p)
    assert code == 0, report["failures"]
    private = report["private"]
    assert private["live_cells"] == 7 and private["erased_cells"] == 2
    assert private["holders"] == 3 and private["pending"] == 2
    assert private["applied"] == private["tree_size"] == report["leaves"]


def test_a_pending_proposal_whose_grant_was_withdrawn_is_a_finding(populated, capsys):
    p = populated
    p.world.operator.admin.ungrant(p.grants["consumer"])  # without rejecting its proposals
    p.world.store.close()
    code, report = _verify(capsys, p)
    assert code == 1
    assert {f["check"] for f in _private(report)} == {"pending"}
    assert {f["database"] for f in _private(report)} == {"provider-pending"}


def test_rollback_to_an_older_authentic_record_passes_the_mac_but_not_the_fsck(populated, capsys):
    """docs/security.md: the record MAC cannot tell an older authentic record from the current
    one; the comparison with a rebuild from the log can."""
    p = populated
    store = p.world.store
    grant = p.grants["all"]
    db = store.projections.db[PJ.GRANTS]
    with store.read_txn() as txn:
        before = bytes(txn.get(grant, db=db))
    p.world.operator.admin.ungrant(grant)
    assert p.recall("a_all") is None
    with store.storage.write() as txn:
        txn.put(grant, before, db=db)
    assert p.recall("a_all") == p.baseline["a_all"]  # type: ignore[attr-defined]
    store.close()
    code, report = _verify(capsys, p)
    assert code == 1
    assert {"database": "p_grants", "key": grant.hex(), "check": "rebuild"}.items() <= next(
        f for f in _private(report) if f["database"] == "p_grants"
    ).items()


@pytest.mark.parametrize("database", ["p_grants", "p_cells"])
def test_a_wrong_record_mac_alone_is_reported_as_a_wrong_record_mac(populated, database, capsys):
    """One byte of a record's MAC (its last TAG_BYTES bytes) flipped, the value untouched: the
    rebuild comparison sees a difference too, but the record MAC check must name it (issue 32:
    a fsck that ignored the MAC still failed the run through "rebuild")."""
    p = populated
    key = p.grants["all"] if database == "p_grants" else p.cells["a1"]
    p.world.store.close()
    with lmdb_raw(p.world.config) as raw:
        raw.set(database.encode(), key, flip(raw.get(database.encode(), key), -1))
    code, report = _verify(capsys, p)
    assert code == 1
    found = sorted((f["database"], f["key"], f["check"]) for f in _private(report))
    assert found == [(database, key.hex(), "rebuild"), (database, key.hex(), "record MAC")]
    assert [f["check"] for f in report["failures"] if "database" not in f] == []


def test_the_store_refuses_to_open_when_the_applied_index_is_not_the_tree_size(populated):
    p = populated
    p.world.store.close()
    with lmdb_raw(p.world.config) as raw:
        lagging_applied_index(p, raw)
    with pytest.raises(StaleProjections, match=r"saihm rebuild --data DIR --replace"):
        Store(p.world.config)
    done = subprocess.run(
        [
            SAIHM,
            "session",
            "open",
            "--data",
            str(p.world.config.data_dir),
            "--holder",
            p.holders["alice"].hex(),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "rebuild --data DIR --replace" in done.stderr
    served = subprocess.run(
        [SAIHM, "serve", "--data", str(p.world.config.data_dir), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert served.returncode == 2
    assert "rebuild --data DIR --replace" in served.stderr and "Traceback" not in served.stderr


def test_rebuild_replace_repairs_forged_and_lagging_projections(populated, capsys):
    p = populated
    store = p.world.store
    with store.storage.write() as txn:
        txn.put(b"\x42" * 32, b"forged", db=store.projections.db[PJ.CONTRACTS])
        txn.delete(p.holders["bob"], db=store.projections.db[PJ.HOLDERS])
    store.close()
    with lmdb_raw(p.world.config) as raw:
        lagging_applied_index(p, raw)
    data = str(p.world.config.data_dir)
    plain = subprocess.run([SAIHM, "rebuild", "--data", data], capture_output=True, text=True)
    assert plain.returncode == 1 and json.loads(plain.stdout)["identical"] is False
    done = subprocess.run(
        [SAIHM, "rebuild", "--data", data, "--replace"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["caughtUp"] == 0
    code, report = _verify(capsys, p)
    assert code == 0, report["failures"]
    again = reopened(p, p.world.config.data_dir.parent)
    try:
        assert again.views() == p.baseline  # type: ignore[attr-defined]
    finally:
        again.world.store.close()


WRITER = textwrap.dedent(
    """
    import json, sys
    from saihm.compose import open_operator
    from saihm.config import Config
    from saihm.protocol import call as binding_call
    config = Config.for_data(sys.argv[1])
    operator = open_operator(config, checkpointer=False)
    token = sys.argv[2]
    for n in range(int(sys.argv[3])):
        cell = binding_call(operator, token, "saihm_remember", {"content": f"written {n}"})
        print(cell["cellId"], flush=True)
    operator.store.close()
    """
)


def test_rebuild_replace_while_another_process_writes_loses_nothing(populated, capsys):
    """Two processes: a writer remembers cells while ``rebuild --replace`` runs repeatedly; every
    acknowledged cell is recalled afterwards and the store verifies."""
    p = populated
    p.world.store.close()
    data = str(p.world.config.data_dir)
    env = dict(os.environ)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, data, p.tokens["bob"], "60"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    replaced = caught_up = during = 0
    while writer.poll() is None or replaced == 0:
        during += writer.poll() is None
        done = subprocess.run(
            [SAIHM, "rebuild", "--data", data, "--replace"], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        replaced += 1
        caught_up += json.loads(done.stdout)["caughtUp"]
    written = writer.stdout.read().split()
    assert writer.wait() == 0 and len(written) == 60
    assert during >= 1  # at least one replacement started while the writer was writing
    code, report = _verify(capsys, p)
    assert code == 0, report["failures"]
    again = reopened(p, p.world.config.data_dir.parent)
    try:
        items = binding_call(again.world.operator, p.tokens["bob"], "saihm_recall", {})
        assert {i["cellId"] for i in items} >= set(written)
    finally:
        again.world.store.close()


def test_the_private_check_reports_progress_per_stage(populated):
    p = populated
    seen: dict[str, list[int]] = {}

    def tasks(name: str, total: int):
        seen[name] = [total, 0]
        return lambda n: seen[name].__setitem__(1, seen[name][1] + n)

    check_store(p.world.store, tasks)
    size = p.world.store.size()
    assert seen["reading the log"] == [size, size]
    assert seen["rebuilding projections"] == [size, size]
    assert seen["recomputing tiles"] == [size, size]
    assert seen["checking cells"] == [9, 9]
    assert seen["checking holder seeds"] == [3, 3]


def test_verify_data_shows_a_progress_bar_on_a_terminal(populated):
    import pty

    p = populated
    p.world.store.close()
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [SAIHM, "verify", "--data", str(p.world.config.data_dir)],
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
            timeout=120,
            env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"},
        )
        os.close(follower)
        follower = -1
        shown = b""
        with contextlib.suppress(OSError):
            while chunk := os.read(leader, 65536):
                shown += chunk
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    assert done.returncode == 0, done.stdout
    assert "RESULT: OK" in done.stdout and "private state" in done.stdout
    assert b"\x1b[" in shown  # rich drew (and cleared) its live display on the terminal


def test_without_the_kek_directory_only_the_public_checks_run_and_the_verdict_says_so(
    populated, tmp_path
):
    p = populated
    p.world.store.close()
    data = str(p.world.config.data_dir)
    elsewhere = tmp_path / "no-such-kek"
    argv = [SAIHM, "verify", "--data", data, "--kek-dir", str(elsewhere), "--no-progress"]
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    assert "private state was NOT checked" in done.stdout and "no KEK directory" in done.stdout
    assert not elsewhere.exists()  # never created
    report = json.loads(subprocess.run([*argv, "--json"], capture_output=True, text=True).stdout)
    assert report["private"] is None and "no KEK directory" in report["private_unchecked"]
