"""``saihm migrate --from DIR --to URL`` (saihm/commands/migrate.py, saihm/offline/migrate.py;
docs/scaling.md "Moving an operator").

The copy runs through the storage interface, so its rules are checked here LMDB to LMDB (no
database needed), and end to end into PostgreSQL in tests/multinode/test_migrate_postgres.py:
the target holds exactly the source's keys and values (the same roots), only an empty target
is written, a failed or killed migrate leaves the target empty, and no write lands on the
source while the copy runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from saihm.compose import initialise
from saihm.config import Config
from saihm.errors import Conflict
from saihm.events import CapabilityScope
from saihm.offline.migrate import migrate_storage, store_namespaces
from saihm.operator import Operator
from saihm.protocol import call as binding_call
from saihm.storage import open_storage
from saihm.storage.url import MARKER
from saihm.store import Store
from tests.support.cli import one_line_refusal, run_saihm
from tests.support.postgres import lmdb_only

pytestmark = lmdb_only(
    "the source of `saihm migrate` is an LMDB data directory, and the PostgreSQL pass "
    "would put populate()'s store in PostgreSQL"
)


def populate(data: Path, remembers: int = 12) -> tuple[bytes, int, str]:
    """A data directory with a holder, ``remembers`` cells and one forgotten; (root, size,
    the holder's session token)."""
    config = Config.for_data(data, checkpoint_interval=3600.0)
    authority = initialise(config)
    store = Store(config)
    operator = Operator(store, config)
    try:
        holder = operator.admin.create_holder()
        token = authority.issue(holder, os.urandom(32), CapabilityScope(), 3600).to_token()
        ids = [
            binding_call(operator, token, "saihm_remember", {"content": f"fact {i}"})["cellId"]
            for i in range(remembers)
        ]
        binding_call(operator, token, "saihm_forget", {"id": ids[0]})
        store.checkpoint_now()
        size = store.size()
        return store.root(size), size, token
    finally:
        store.close()


def _copy_dir(data: Path, to: Path) -> None:
    """The node-local files of ``data`` (everything but its LMDB store) in ``to``."""
    shutil.copytree(
        data, to, ignore=lambda d, names: ["lmdb"] if Path(d) == data else [], dirs_exist_ok=True
    )


def _all_pairs(location: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    names = store_namespaces()
    storage = open_storage(location, names, readonly=True)
    try:
        with storage.read() as txn:
            return {n: list(txn.scan(storage.namespace(n))) for n in names}
    finally:
        storage.close()


def test_the_copy_holds_every_key_and_value_of_every_namespace_and_the_same_roots(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    root, size, _ = populate(data)
    names = store_namespaces()
    source = open_storage(data / "lmdb", names)
    target = open_storage(tmp_path / "copy" / "lmdb", names)
    try:
        report = migrate_storage(source, target, names)
    finally:
        source.close()
        target.close()
    assert report.tree_size == size
    assert report.keys == sum(report.namespaces.values()) > size
    assert _all_pairs(data / "lmdb") == _all_pairs(tmp_path / "copy" / "lmdb")
    # The copy serves the same log: the store opened over it (node-local files copied beside
    # it) has the same size and root, and its projections reflect the whole log.
    _copy_dir(data, tmp_path / "copy")
    store = Store(Config.for_data(tmp_path / "copy"))
    try:
        assert store.size() == size
        assert store.root(size) == root
    finally:
        store.close()


def test_a_target_that_holds_any_key_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    data = tmp_path / "data"
    populate(data, remembers=2)
    names = store_namespaces()
    target = open_storage(tmp_path / "target", names)
    with target.write() as txn:
        txn.put(b"\x00" * 8, b"someone else's leaf", db=target.namespace(b"leaves"))
    source = open_storage(data / "lmdb", names)
    try:
        with pytest.raises(Conflict, match="not empty"):
            migrate_storage(source, target, names)
        with target.read() as txn:
            assert [n for n in names if txn.count(target.namespace(n))] == [b"leaves"]
            assert txn.count(target.namespace(b"leaves")) == 1
    finally:
        source.close()
        target.close()


@pytest.mark.parametrize("step", ["copied", "before_commit"])
def test_a_migrate_that_fails_part_way_leaves_the_target_empty(tmp_path: Path, step: str) -> None:
    data = tmp_path / "data"
    populate(data, remembers=3)
    names = store_namespaces()
    source = open_storage(data / "lmdb", names)
    target = open_storage(tmp_path / "target", names)

    def fault(at: str) -> None:
        if at == step:
            raise OSError("the disk went away")

    try:
        with pytest.raises(OSError):
            migrate_storage(source, target, names, fault=fault)
        with target.read() as txn:
            assert sum(txn.count(target.namespace(n)) for n in names) == 0
        # Nothing was held back: the same migrate then succeeds into the same target.
        assert migrate_storage(source, target, names).tree_size > 0
    finally:
        source.close()
        target.close()


_WRITER = """
import sys, time
from saihm.storage import open_storage
names = sys.argv[2].split(",")
print("ready", flush=True)
storage = open_storage(sys.argv[1], [n.encode() for n in names])
with storage.write() as txn:
    txn.put(b"written-during-migrate", b"1", db=storage.namespace(b"stats"))
print(time.time(), flush=True)
storage.close()
"""


def test_no_write_lands_on_the_source_while_the_copy_runs(tmp_path: Path) -> None:
    """A second process writing to the source waits until the target has committed, so the
    target is the source of one moment (and no KEK rotation can re-wrap behind the copy)."""
    data = tmp_path / "data"
    populate(data, remembers=2)
    names = store_namespaces()
    source = open_storage(data / "lmdb", names)
    target = open_storage(tmp_path / "target", names)
    writer: list[subprocess.Popen[str]] = []
    committed_at: list[float] = []

    def fault(at: str) -> None:
        if at != "copied":
            return
        listed = ",".join(n.decode() for n in names)
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(data / "lmdb"), listed],
            stdout=subprocess.PIPE,
            text=True,
        )
        writer.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        # Bounded: a writer that is not held back by the migrate finishes well within this.
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=3)

    try:
        migrate_storage(
            source, target, names, fault=fault, committed=lambda r: committed_at.append(time.time())
        )
    finally:
        source.close()
        target.close()
    (proc,) = writer
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert float(out.strip().splitlines()[-1]) >= committed_at[0]
    assert b"written-during-migrate" in dict(_all_pairs(data / "lmdb")[b"stats"])
    assert b"written-during-migrate" not in dict(_all_pairs(tmp_path / "target")[b"stats"])


def test_migrate_refuses_what_it_cannot_use_in_one_line_without_the_password(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    populate(data, remembers=1)
    line = one_line_refusal(
        run_saihm("migrate", "--from", str(tmp_path), "--to", "postgresql://u@h/x")
    )
    assert "not a saihm data directory" in line
    line = one_line_refusal(
        run_saihm("migrate", "--from", str(data), "--to", "mysql://u:hunter22@h/db")
    )
    assert "postgresql://" in line and "hunter22" not in line
    line = one_line_refusal(
        run_saihm("migrate", "--from", str(data), "--to", "postgresql://u:hunter22@h:x/d")
    )
    assert "hunter22" not in line
    assert not (data / MARKER).exists()


def test_a_migrated_data_directory_is_not_served_from_its_lmdb_again(tmp_path: Path) -> None:
    """Serving DIR's LMDB after a migrate would continue one log in two places (a fork)."""
    data = tmp_path / "data"
    populate(data, remembers=1)
    (data / MARKER).write_text(json.dumps({"to": "postgresql://u:***@db/log", "treeSize": 3}))
    line = one_line_refusal(run_saihm("holder", "create", "--data", str(data)))
    assert "migrated to postgresql://u:***@db/log" in line and "--store" in line
    line = one_line_refusal(
        run_saihm("session", "open", "--data", str(data), "--holder", "00" * 32)
    )
    assert "--store" in line
