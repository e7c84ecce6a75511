"""The store is the only writer (docs/internals.md "The store"; issue 22).

Every write to a data directory's storage goes through the store's one write path (the group
commit: the free-disk floor, map growth and retry, the fault hooks; saihm/store/commit.py), so
no module outside ``saihm/store/`` may open a storage write transaction, put or delete in one,
or call the keyring's writing functions. The storage drivers, the keyring, the projections and
the translog implement what the store calls with its own transaction: they are the floor
below it, and are not callers.

Found by reading the source (AST), so a write cannot hide in a function body.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "saihm"

#: The store and the floors it drives with its own transaction.
WRITERS = ("store", "storage", "keyring", "projections", "translog")
#: Writers of storages that are not a data directory's live store, each with why. A key is a
#: path under saihm/ or its tail, so a module re-housed (``commands/migrate.py``) still matches.
OTHER_STORAGES = {
    # The witness's own LMDB of per-origin heads (c2sp.org/tlog-witness).
    "witness/state.py": "the witness state",
    # The auditor's own mirror state and replay output, never an operator's storage.
    "audit/mirrorstate.py": "the mirror's state",
    "audit/replay.py": "the replayed projections the auditor compares",
    # A probe storage the benchmark creates and deletes.
    "bench/storescale.py": "the commit-latency probe",
    # A scratch storage (Rebuilder.scratch_storage) the recomputed tree goes into.
    "fsck.py": "the fsck's scratch tree",
    # An offline copy into a new, empty storage; the source is held still, not written.
    "migrate.py": "the migration's target",
}
#: The keyring's writing functions (saihm/keyring/keyring.py, kekdir.py).
KEYRING_WRITERS = frozenset(
    {
        "put_dek",
        "put_seed",
        "destroy",
        "rewrap_all",
        "rotate",
        "retire_unused",
        "new_generation",
        "retire",
        "finish_retirements",
    }
)
#: A storage transaction's writing methods; each takes ``db=`` (saihm/storage/base.py).
TXN_WRITERS = frozenset({"put", "put_many", "delete", "clear"})


def writes_in(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each storage or keyring write ``tree`` makes: (line, what)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        keywords = {k.arg for k in node.keywords}
        if name == "write" and not node.args and not node.keywords:
            # Storage.write() opens a write transaction; a file's write takes its data.
            yield node.lineno, "opens a storage write transaction"
        elif name in TXN_WRITERS and "db" in keywords:
            yield node.lineno, f"{name}(..., db=...) in a storage transaction"
        elif name in KEYRING_WRITERS and node.args:
            yield node.lineno, f"calls the keyring's {name}"


def _exempt(rel: str) -> bool:
    return any(rel == key or rel.endswith("/" + key) for key in OTHER_STORAGES)


def outside_writers() -> list[str]:
    """Every write found in a module outside the store and its floors, not exempt."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.split("/")[0] in WRITERS or _exempt(rel):
            continue
        for line, what in writes_in(ast.parse(path.read_text(), filename=str(path))):
            found.append(f"saihm/{rel}:{line}: {what}")
    return found


def test_no_module_outside_the_store_writes_storage_or_the_keyring() -> None:
    assert outside_writers() == []


def test_the_detector_sees_each_kind_of_write() -> None:
    """Control: the shapes the rule forbids are found, and a file's write is not."""
    source = """
with store.storage.write() as txn:
    txn.put(k, v, db=db)
    txn.delete(k, db=db)
    keyring.destroy(txn, cell_id)
    keyring.put_dek(txn, cell_id, dek)
f.write("text")
keyring.dek(txn, cell_id)
"""
    found = [what for _, what in writes_in(ast.parse(source))]
    assert found == [
        "opens a storage write transaction",
        "put(..., db=...) in a storage transaction",
        "delete(..., db=...) in a storage transaction",
        "calls the keyring's destroy",
        "calls the keyring's put_dek",
    ]


def test_each_exemption_still_names_a_writer() -> None:
    """An exemption for a module that is gone, or no longer writes, is deleted, not kept."""
    for key in OTHER_STORAGES:
        paths = [p for p in ROOT.rglob("*.py") if _exempt(p.relative_to(ROOT).as_posix())]
        matched = [p for p in paths if p.as_posix().endswith("/" + key)]
        assert matched, f"no module saihm/.../{key}: delete its exemption"
        assert any(list(writes_in(ast.parse(p.read_text()))) for p in matched), key
