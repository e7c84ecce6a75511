"""There is one read path: nothing in the package reads cells around the checked reader.

requirements.txt: "Everything that reads the store passes that filter, including the code that
runs the agent", and a system is disqualified if "Code inside the system reads the store
without passing the check that outside callers pass". DESIGN.md: the store is "the only owner
of the LMDB environment"; "What proves that a caller may read is issued elsewhere, so the
caller cannot manufacture it" (requirements.txt, Security considerations).

Statically (AST over every module of ``saihm``): only the store's environment opens the
operator's storage (and its rebuild a scratch one), apart from the exceptions listed below with
their reasons; and only saihm/store/read/reader.py (and ``saihm.events``, which defines them) calls
the functions that turn a cell into plaintext, pending provider proposals included.
Behaviourally: an ``Access`` the store did not issue is refused, by the cell reads and by the
opening of a pending proposal.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import saihm
from saihm.errors import Unauthenticated
from tests.support.world import World, hand_made_access

PACKAGE = Path(saihm.__file__).parent
#: The one module that turns a stored cell into plaintext.
READER = "saihm/store/read/reader.py"
#: The store's openers: the environment opens the operator's storage with every namespace.
ENVIRONMENT = "saihm/store/environment.py"
STORE_OPENERS = {
    ENVIRONMENT: "open_storage: the operator's storage, every namespace",
    "saihm/store/rebuild.py": "a fresh scratch LMDB (its own new directory) that a rebuild "
    "replays the log into, compared or copied, then deleted",
}

# Modules other than the store allowed to open a storage (saihm/storage), and why.
LMDB_OPEN_ALLOWED = {
    "saihm/storage/__init__.py": "open_storage itself: picks the driver for a location",
    "saihm/translog/tree.py": "the stand-alone pinned MerkleTree over its own directory; "
    "holds leaves and hashes only, no cells or keys",
    "saihm/audit/datadir.py": "offline export/verify of a data directory; read-only "
    "(readonly=True), and audit never decrypts",
    "saihm/audit/replay.py": "writes a fresh research LMDB (its own new directory) from a "
    "public bundle: receipts, keys, erasures, tallies; never a data directory, no cells",
    "saihm/witness/state.py": "a witness's own state directory (per-origin size and root of "
    "the latest cosigned checkpoint); never a data directory, no cells or keys",
    "saihm/audit/mirrorstate.py": "a mirror's own state (.saihm-mirror/ in its directory): "
    "public data fetched from a log (holder public keys, receipt ids, erasures, the verified "
    "prefix); never a data directory, no cells",
    "saihm/offline/backup.py": "saihm backup: copies one read snapshot of a data directory "
    "(readonly=True, LmdbStorage.copy_to); never decrypts, never reads a KEK",
    "saihm/commands/migrate.py": "saihm migrate: copies every namespace byte for byte from an LMDB "
    "store to an empty PostgreSQL one; never decrypts, never reads a KEK",
    "saihm/http/serve.py": "saihm serve --store: opens and closes the database once before "
    "anything is created, so a bad URL fails fast; reads nothing",
    "saihm/bench/storescale.py": "saihm bench store: times commits in its own namespace "
    "(bench-probe) of a scratch schema; never a data directory's data",
}
READONLY_REQUIRED = {"saihm/audit/datadir.py", "saihm/offline/backup.py"}

# Functions that produce plaintext (or the key to it) from a stored cell.
PLAINTEXT_FUNCTIONS = {"decrypt", "decrypt_bytes", "open_cell"}
PLAINTEXT_METHODS = {"dek"}  # Keyring.dek: the unwrapped DEK
# saihm/bench/crypto.py opens cells it sealed itself, with its own throw-away keys, to time
# the envelope; it never touches a store, so it reads nothing anyone else wrote.
PLAINTEXT_ALLOWED = {READER, "saihm/bench/crypto.py"}
PLAINTEXT_ALLOWED_PREFIX = "saihm/events/"  # defines the envelope functions


def modules() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = "saihm/" + path.relative_to(PACKAGE).as_posix()
        out.append((rel, ast.parse(path.read_text(encoding="utf-8"), filename=rel)))
    return out


#: The only module that imports ``lmdb``: every other one reaches LMDB through it.
LMDB_DRIVER = "saihm/storage/lmdb.py"
STORAGE_OPENERS = ("LmdbStorage", "open_storage")


def lmdb_imports(tree: ast.Module) -> list[int]:
    """Lines that import ``lmdb`` (or anything from it), however spelled."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(a.name == "lmdb" or a.name.startswith("lmdb.") for a in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "lmdb" or node.module.startswith("lmdb."):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("__import__", "import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "lmdb"
        ):
            lines.append(node.lineno)
    return lines


def lmdb_opens(tree: ast.Module) -> list[ast.Call]:
    """Calls that open a storage: ``LmdbStorage(...)`` or ``open_storage(...)``, by name or
    as an attribute."""
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in STORAGE_OPENERS:
            calls.append(node)
    return calls


def plaintext_uses(tree: ast.Module) -> list[tuple[int, str]]:
    """Imports or references of the plaintext functions, and ``.dek(...)`` calls."""
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            uses += [(node.lineno, a.name) for a in node.names if a.name in PLAINTEXT_FUNCTIONS]
        elif isinstance(node, ast.Name) and node.id in PLAINTEXT_FUNCTIONS:
            uses.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and node.attr in PLAINTEXT_FUNCTIONS:
            uses.append((node.lineno, node.attr))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in PLAINTEXT_METHODS
        ):
            uses.append((node.lineno, f".{node.func.attr}()"))
    return uses


def test_the_scanner_sees_the_stores_own_open_and_decrypt() -> None:
    """Control: the AST checks find what the store does, so an empty finding elsewhere counts."""
    trees = dict(modules())
    assert all(lmdb_opens(trees[rel]) for rel in STORE_OPENERS)
    opened = [ast.unparse(c.func) for c in lmdb_opens(trees[ENVIRONMENT])]
    assert opened == ["open_storage"]  # the operator's storage is opened in one place
    found = {name for _, name in plaintext_uses(trees[READER])}
    assert {"decrypt", ".dek()"} <= found


def test_the_plaintext_scanner_sees_every_spelling() -> None:
    """Control: a decrypt imported, called by name or as an attribute, and a DEK unwrapped,
    are each found; a look-alike name is not."""
    for source in (
        "from saihm.events.envelope import decrypt",
        "from saihm.events.envelope import decrypt as d",
        "import saihm.events.envelope as e\ne.decrypt(c, k)",
        "f = envelope.open_cell",
        "store.keyring.dek(txn, cell_id)",
    ):
        assert plaintext_uses(ast.parse(source)), source
    for source in ("decrypted = 1", "x.dek", "def decrypt_later(): pass", "'decrypt'"):
        assert not plaintext_uses(ast.parse(source)), source


def test_lmdb_is_imported_only_by_its_driver() -> None:
    """Issue 12: the package reaches LMDB only through saihm/storage/lmdb.py; no other module
    imports ``lmdb`` (so no lmdb transaction, cursor or exception leaks into the store)."""
    importers = {rel: lines for rel, tree in modules() if (lines := lmdb_imports(tree))}
    assert set(importers) == {LMDB_DRIVER}, f"lmdb imported outside its driver: {importers}"


def test_the_lmdb_import_scanner_sees_every_spelling() -> None:
    """Control: each way of importing lmdb is found, and a look-alike name is not."""
    for source in (
        "import lmdb",
        "import os, lmdb as db",
        "from lmdb import open",
        "from lmdb.cffi import x",
        "__import__('lmdb')",
        "import_module('lmdb')",
        "def f():\n    import lmdb",
    ):
        assert lmdb_imports(ast.parse(source)), source
    for source in ("import lmdbx", "from saihm.storage import lmdb", "x = 'import lmdb'"):
        assert not lmdb_imports(ast.parse(source)), source


def test_only_the_store_opens_lmdb() -> None:
    """The store is "the only owner of the storage" (DESIGN.md): its environment opens it (and
    its rebuild a scratch copy), with the listed exceptions; each exception is still needed, and
    the audit opens are read-only."""
    openers: dict[str, list[ast.Call]] = {}
    for rel, tree in modules():
        calls = lmdb_opens(tree)
        if calls and rel not in STORE_OPENERS:
            openers[rel] = calls
    unexpected = {rel: [c.lineno for c in calls] for rel, calls in openers.items()}
    for rel in LMDB_OPEN_ALLOWED:
        unexpected.pop(rel, None)
    assert unexpected == {}, f"a storage opened outside the store: {unexpected}"
    assert set(openers) == set(LMDB_OPEN_ALLOWED), "an allowed exception is no longer used"
    for rel in READONLY_REQUIRED:
        for call in openers[rel]:
            kw = {k.arg: k.value for k in call.keywords}
            readonly = kw.get("readonly")
            assert isinstance(readonly, ast.Constant) and readonly.value is True, (
                f"{rel}:{call.lineno} opens a storage without readonly=True"
            )


def test_only_the_store_produces_plaintext() -> None:
    """ "Code inside the system reads the store without passing the check that outside callers
    pass" disqualifies (requirements.txt): no module but the store's checked reader decrypts
    or unwraps a DEK (not the store's other parts, not the provider's pending proposals)."""
    offenders = {}
    for rel, tree in modules():
        if rel in PLAINTEXT_ALLOWED or rel.startswith(PLAINTEXT_ALLOWED_PREFIX):
            continue
        uses = plaintext_uses(tree)  # Keyring.dek's definition is not a call: not listed
        if uses:
            offenders[rel] = uses
    assert offenders == {}, f"plaintext produced outside the store: {offenders}"


def test_hand_made_access_is_refused(world: World) -> None:
    """ "What proves that a caller may read is issued elsewhere, so the caller cannot
    manufacture it": an Access not made by Store.authenticate reads nothing."""
    a = world.holder()
    world.call(a, "saihm_remember", content="private")
    real = world.store.authenticate(a.token)
    assert [c.payload.content for c in world.store.read(real)] == ["private"]  # control
    with pytest.raises(Unauthenticated):
        world.store.read(hand_made_access(a.holder_id, a.session_id))
    with pytest.raises(Unauthenticated):
        world.store.read(hand_made_access(a.holder_id, a.session_id), cell_ids=[bytes(32)])


def test_access_widened_by_replace_is_refused(world: World) -> None:
    """An issued Access edited with dataclasses.replace to name another holder is refused."""
    a, b = world.holder(), world.holder()
    world.call(b, "saihm_remember", content="b's secret")
    forged = dataclasses.replace(
        world.store.authenticate(a.token), holder_id=b.holder_id, all_sessions=True
    )
    try:
        seen = [c.payload.content for c in world.store.read(forged)]
    except Unauthenticated:
        return
    assert seen == [], f"a forged Access read another holder's cells: {seen}"
