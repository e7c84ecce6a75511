"""``saihm migrate --from DIR --to URL`` into a real PostgreSQL (saihm/offline/migrate.py).

Afterwards ``saihm verify --data DIR --store URL`` passes, the tree roots are identical, the
migrated log serves its old tokens from PostgreSQL, a second migrate into the now non-empty
target is refused, and a migrate killed with SIGKILL mid-copy leaves the target empty.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from saihm.config import Config
from saihm.offline.migrate import store_namespaces
from saihm.storage import open_storage
from saihm.store import Store
from tests.cli.test_migrate import populate
from tests.support.cli import run_saihm
from tests.support.postgres import fresh_location, lmdb_only
from tests.support.serve import post, serving

pytestmark = lmdb_only(
    "the source of `saihm migrate` is an LMDB data directory, and the PostgreSQL pass "
    "would put populate()'s store in PostgreSQL"
)


def _saihm(*argv: str) -> subprocess.CompletedProcess[str]:
    return run_saihm(*argv, timeout=300)


def _keys_in(url: str) -> int:
    names = store_namespaces()
    storage = open_storage(url, names)
    try:
        with storage.read() as txn:
            return sum(txn.count(storage.namespace(n)) for n in names)
    finally:
        storage.close()


def test_a_migrated_log_verifies_with_identical_roots_and_serves_its_old_tokens(
    tmp_path: Path, postgres_location: str
) -> None:
    url = postgres_location
    data = tmp_path / "data"
    root, size, old_token = populate(data)
    done = _saihm("migrate", "--from", str(data), "--to", url, "--no-progress")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["treeSize"] == size and report["keys"] > size

    verified = _saihm("verify", "--data", str(data), "--store", url, "--no-progress")
    assert verified.returncode == 0, verified.stdout[-4000:] + verified.stderr[-2000:]
    store = Store(Config.for_data(data, store=url))
    try:
        assert store.size() == size and store.root(size) == root
    finally:
        store.close()

    # The LMDB store is not served again (it would fork the log); the PostgreSQL one is.
    refused = _saihm("holder", "create", "--data", str(data))
    assert refused.returncode != 0 and "--store" in refused.stderr
    created = _saihm("holder", "create", "--data", str(data), "--store", url)
    assert created.returncode == 0, created.stderr
    token = json.loads(created.stdout)["token"]
    with serving(tmp_path, "--data", str(data), env={"SAIHM_STORE": url}) as (_, node):
        status, answer = post(node, token, "saihm_remember", {"content": "after the move"})
        assert status == 200, answer
        status, cells = post(node, token, "saihm_recall", {})
        assert status == 200 and [c["plaintext"] for c in cells] == ["after the move"]
        # The cells written before the move: all but the forgotten "fact 0", decrypted.
        status, cells = post(node, old_token, "saihm_recall", {"limit": 100})
        assert status == 200
        assert sorted(c["plaintext"] for c in cells) == sorted(f"fact {i}" for i in range(1, 12))

    again = _saihm("migrate", "--from", str(tmp_path / "data"), "--to", url)
    assert again.returncode != 0
    assert len(again.stderr.strip().splitlines()) == 1 and "Traceback" not in again.stderr


_KILLED_CHILD = """
import sys, time
from saihm.offline.migrate import migrate_storage, store_namespaces
from saihm.storage import open_storage
names = store_namespaces()
source = open_storage(sys.argv[1], names)
target = open_storage(sys.argv[2], names)
def fault(step):
    if step == "copied":
        print("copied", flush=True)
        time.sleep(600)
migrate_storage(source, target, names, fault=fault)
"""


def test_a_migrate_killed_mid_copy_leaves_the_target_empty(
    tmp_path: Path, postgres_location: str
) -> None:
    url = postgres_location
    data = tmp_path / "data"
    _, size, _ = populate(data, remembers=30)
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CHILD, str(data / "lmdb"), url],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "copied"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert _keys_in(url) == 0
    # The database released the dead migrate's lock and transaction: a new one succeeds.
    done = _saihm("migrate", "--from", str(data), "--to", url, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["treeSize"] == size


def test_a_migrated_directory_opens_only_the_store_it_was_migrated_to(
    tmp_path: Path, postgres_location: str
) -> None:
    """The first --store after a migrate must be its target: another schema would be an empty
    store whose `kek rotate` retires the KEKs the migrated DEKs are wrapped under."""
    url = postgres_location
    data = tmp_path / "data"
    populate(data, remembers=2)
    done = _saihm("migrate", "--from", str(data), "--to", url, "--no-progress")
    assert done.returncode == 0, done.stderr
    kek = sorted(p.name for p in Config.for_data(data, store=url).kek_dir.rglob("*"))
    with fresh_location() as other:
        refused = _saihm("kek", "rotate", "--data", str(data), "--store", other)
        assert refused.returncode != 0 and refused.stdout == ""
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "--store" in lines[0] and "Traceback" not in refused.stderr
        assert _keys_in(other) == 0
    assert sorted(p.name for p in Config.for_data(data, store=url).kek_dir.rglob("*")) == kek
    rotated = _saihm("kek", "rotate", "--data", str(data), "--store", url)
    assert rotated.returncode == 0, rotated.stderr
    assert _saihm("verify", "--data", str(data), "--store", url, "--no-progress").returncode == 0
