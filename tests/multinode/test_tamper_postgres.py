"""Raw-row tamper tests on a PostgreSQL store (issue 16): what catches an edit on LMDB catches it
here.

The LMDB tests (tests/store/test_generic_tamper.py, test_fsck.py, test_fail_closed.py and
tests/audit/test_monitor.py) edit DATA/lmdb raw. Here the attacker has the database instead: a
psycopg connection that rewrites ``saihm_kv`` rows directly (flip a byte of a leaf, a stored
cell, a projection record, a checkpoint; delete, insert or swap rows; roll the log back by
deleting the newest leaves, or restore an older copy of every row). After each edit the same
checks run as on LMDB: ``saihm verify --data DIR --store URL`` (its public and private halves),
the store's own refusal to open, a running and a second server process's reads, and a
monitor's consistency check against a checkpoint it held. Every refusal is one line with no
traceback, and the URL's password is never printed.

The populated store is made once per module; every test starts from a restored copy of all its
rows, so no edit leaks into the next test.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tests.store.populated as populated_module
from saihm.audit.monitor import check_once
from saihm.commands import main as cli
from saihm.projections import apply as PJ
from saihm.projections.keys import u64
from saihm.store import StaleProjections, Store
from tests.store import damage
from tests.store.damage import Damage, RawStore, Verdicts, flip, random_edits, verify_code
from tests.store.populated import Populated, populate
from tests.support.postgres import fresh_location
from tests.support.serve import SAIHM, post, serving
from tests.support.world import make_world

SEED = 16
OPS = ("flip", "delete", "swap", "drop_last", "insert")

Row = tuple[int, bytes, bytes]


class Raw:
    """The attacker's view of the store: ``saihm_kv`` rows by namespace name, over psycopg."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        rows = self.conn.execute("SELECT name, id FROM saihm_namespace").fetchall()
        self.ids: dict[bytes, int] = {bytes(name): ns for name, ns in rows}

    def close(self) -> None:
        self.conn.close()

    def names(self) -> list[bytes]:
        """Every namespace that holds a row, in name order."""
        used = {ns for (ns,) in self.conn.execute("SELECT DISTINCT ns FROM saihm_kv")}
        return sorted(name for name, ns in self.ids.items() if ns in used)

    def rows(self, name: bytes) -> list[tuple[bytes, bytes]]:
        """The namespace's (key, value) rows in key order."""
        found = self.conn.execute(
            "SELECT k, v FROM saihm_kv WHERE ns = %s ORDER BY k", (self.ids[name],)
        ).fetchall()
        return [(bytes(k), bytes(v)) for k, v in found]

    def get(self, name: bytes, key: bytes) -> bytes:
        row = self.conn.execute(
            "SELECT v FROM saihm_kv WHERE ns = %s AND k = %s", (self.ids[name], key)
        ).fetchone()
        assert row is not None, (name, key.hex())
        return bytes(row[0])

    def set(self, name: bytes, key: bytes, value: bytes | None) -> None:
        """Write (or, with None, delete) one row, as an UPDATE/INSERT/DELETE of the table."""
        ns = self.ids[name]
        if value is None:
            done = self.conn.execute("DELETE FROM saihm_kv WHERE ns = %s AND k = %s", (ns, key))
            assert done.rowcount == 1, (name, key.hex())
        else:
            self.conn.execute(
                "INSERT INTO saihm_kv (ns, k, v) VALUES (%s, %s, %s) "
                "ON CONFLICT (ns, k) DO UPDATE SET v = EXCLUDED.v",
                (ns, key, value),
            )

    def snapshot(self) -> list[Row]:
        """Every row of the table (the attacker's "backup")."""
        rows = self.conn.execute("SELECT ns, k, v FROM saihm_kv ORDER BY ns, k").fetchall()
        return [(ns, bytes(k), bytes(v)) for ns, k, v in rows]

    def restore(self, rows: list[Row]) -> None:
        """Replace every row of the table with ``rows``, in one transaction."""
        with self.conn.transaction():
            self.conn.execute("DELETE FROM saihm_kv")
            with self.conn.cursor() as cur:
                cur.executemany("INSERT INTO saihm_kv (ns, k, v) VALUES (%s, %s, %s)", rows)


@dataclass
class Template:
    p: Populated
    url: str
    rows: list[Row]

    @property
    def data(self) -> Path:
        return self.p.world.config.data_dir

    @property
    def store_args(self) -> list[str]:
        return ["--data", str(self.data), "--store", self.url]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Template]:
    with fresh_location() as url:
        root = tmp_path_factory.mktemp("pgtamper")
        make = partial(make_world, store=url)
        with mock.patch.object(populated_module, "make_world", make):
            p = populate(root)
        p.baseline = p.views()  # type: ignore[attr-defined]
        p.world.store.close()
        raw = Raw(url)
        try:
            rows = raw.snapshot()
        finally:
            raw.close()
        yield Template(p, url, rows)


@pytest.fixture
def t(template: Template) -> Iterator[Template]:
    """The template with every row restored to the populated state."""
    raw = Raw(template.url)
    try:
        raw.restore(template.rows)
    finally:
        raw.close()
    yield template


@pytest.fixture
def raw(t: Template) -> Iterator[Raw]:
    r = Raw(t.url)
    yield r
    r.close()


def _password(url: str) -> str:
    password = urlsplit(url).password
    assert password, "the test server's URL carries a password"
    return password


def _verify(capsys: pytest.CaptureFixture[str], t: Template) -> tuple[int, dict[str, Any]]:
    """``saihm verify --data DIR --store URL --json`` in this process: (exit code, report)."""
    capsys.readouterr()
    code = cli.main(["verify", *t.store_args, "--json", "--no-progress"])
    out, err = capsys.readouterr()
    assert _password(t.url) not in out + err
    return code, json.loads(out) if out.strip() else {}


def _run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SAIHM, *argv], capture_output=True, text=True, timeout=timeout)


# -- every namespace, every edit --------------------------------------------------------------


def test_the_untouched_postgresql_store_verifies_with_its_private_state(t: Template, capsys):
    code, report = _verify(capsys, t)
    assert code == 0, report.get("failures")
    private = report["private"]
    assert private["live_cells"] == 7 and private["erased_cells"] == 2
    assert private["holders"] == 3 and private["pending"] == 2
    assert private["applied"] == private["tree_size"] == report["leaves"]


def test_every_raw_row_edit_of_every_namespace_is_detected_or_harmless(t: Template, raw, capsys):
    """The PostgreSQL counterpart of tests/store/test_generic_tamper.py (plus inserted rows):
    each edit is found by ``verify --data --store`` or changes no token's recall, and no edit
    lets a token see a plaintext it could not see before."""
    p = t.p
    baseline: dict[str, frozenset[str] | None] = p.baseline  # type: ignore[attr-defined]
    tables = [(name, raw.rows(name)) for name in raw.names()]
    edits = random_edits(tables, random.Random(SEED), insert=True)
    verdicts = Verdicts(baseline)
    for name, op, changes in edits:
        for key, value in changes:
            raw.set(name, key, value)
        try:
            code, report = _verify(capsys, t)
            views = t.p.views_reopened()
        finally:
            raw.restore(t.rows)
        verdicts.judge(name, op, code, report, views)
    counts, harmless = verdicts.counts, verdicts.harmless
    print(f"\npostgresql tamper: {len(edits)} edits: {dict(counts)}; harmless: {harmless}")
    assert verdicts.undetected == []
    assert {op for _, op, _ in edits} == set(OPS)
    # The log, its tiles, checkpoints, cells and the projections were all among the edited.
    assert {b"leaves", b"tree", b"checkpoints", b"bodies", b"p_meta"} <= {n for n, _, _ in edits}
    # Every edit of the log itself is caught (no harmless edit of a leaf).
    assert not [h for h in harmless if h[0] == "leaves"]
    assert counts["detected"] >= len([e for e in edits if e[0] == b"leaves"])


# -- named damage: verify --data names the namespace, key and check ----------------------------


def _flip_a_stored_cell(p: Populated, raw: RawStore) -> None:
    value = raw.get(b"bodies", p.cells["bob"])
    raw.set(b"bodies", p.cells["bob"], flip(value, len(value) // 2))


def _flip_a_projection_record(p: Populated, raw: RawStore) -> None:
    value = raw.get(PJ.GRANTS, p.grants["all"])
    raw.set(PJ.GRANTS, p.grants["all"], flip(value, 1))


DAMAGE: dict[str, tuple[Damage, str, str, str]] = {
    # as in tests/store/test_fsck.py, and one more: a flipped byte of a stored cell
    **damage.DAMAGE,
    "flip_a_stored_cell": (_flip_a_stored_cell, "bodies", "bob", "live cell"),
}


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_verify_data_store_names_the_namespace_key_and_check_of_private_damage(
    t: Template, raw: Raw, name: str, capsys
) -> None:
    damage_of, database, cell, check = DAMAGE[name]
    damage_of(t.p, raw)
    code, report = _verify(capsys, t)
    assert code == 1
    private = [f for f in report["failures"] if "database" in f]
    found = [f for f in private if f["database"] == database and f["check"] == check]
    assert found, private
    if cell:
        assert any(f["key"] == t.p.cells[cell].hex() for f in found)


def test_a_flipped_projection_record_is_refused_by_a_read_and_found_by_verify(
    t: Template, raw: Raw, capsys
) -> None:
    """The record MAC (saihm/projections/seal.py) on PostgreSQL: the grant with a flipped byte
    no longer opens, so its token is refused, and the fsck names the record."""
    _flip_a_projection_record(t.p, raw)
    views = t.p.views_reopened()
    assert views["a_all"] is None
    baseline: dict[str, frozenset[str] | None] = t.p.baseline  # type: ignore[attr-defined]
    assert {k: v for k, v in views.items() if k != "a_all"} == {
        k: v for k, v in baseline.items() if k != "a_all"
    }
    code, report = _verify(capsys, t)
    assert code == 1
    assert any(
        f.get("database") == "p_grants" and f.get("key") == t.p.grants["all"].hex()
        for f in report["failures"]
    ), report["failures"]


# -- the command line: one line, no traceback, no password ------------------------------------


def _flip_newest_leaf(p: Populated, raw: RawStore) -> None:
    key, value = raw.rows(b"leaves")[-1]
    raw.set(b"leaves", key, flip(value, len(value) // 2))


def _flip_newest_checkpoint(p: Populated, raw: RawStore) -> None:
    key, value = raw.rows(b"checkpoints")[-1]
    raw.set(b"checkpoints", key, flip(value, len(value) // 2))


def _delete_newest_leaves(p: Populated, raw: RawStore) -> None:
    for key, _ in raw.rows(b"leaves")[-3:]:
        raw.set(b"leaves", key, None)


SUBPROCESS_EDITS: dict[str, Damage] = {
    "flip_a_leaf": _flip_newest_leaf,
    "flip_a_checkpoint": _flip_newest_checkpoint,
    "flip_a_stored_cell": _flip_a_stored_cell,
    "flip_a_projection_record": _flip_a_projection_record,
    "delete_the_newest_leaves": _delete_newest_leaves,
}


@pytest.mark.parametrize("name", sorted(SUBPROCESS_EDITS))
def test_saihm_verify_data_store_fails_on_each_edit_without_a_traceback(
    t: Template, raw: Raw, name: str
) -> None:
    SUBPROCESS_EDITS[name](t.p, raw)
    done = _run("verify", *t.store_args, "--no-progress")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "RESULT: FAIL" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert _password(t.url) not in done.stdout + done.stderr


def test_a_log_rolled_back_by_deleting_its_newest_leaves_is_refused_by_every_opener(
    t: Template, raw: Raw
) -> None:
    """The projections are ahead of the shortened log: the store refuses to open (as on LMDB
    with a lagging applied index), in this process, in a data command and in ``saihm serve``,
    each with one line naming the repair and never the password."""
    _delete_newest_leaves(t.p, raw)
    with pytest.raises(StaleProjections, match=r"saihm rebuild --data DIR --replace"):
        Store(t.p.world.config)
    holder = t.p.holders["alice"].hex()
    for argv, timeout in (
        (["session", "open", *t.store_args, "--holder", holder], 120),
        (["serve", *t.store_args, "--port", "0"], 60),
    ):
        done = _run(*argv, timeout=timeout)
        assert done.returncode == 2, (argv[0], done.stderr)
        assert argv[0] == "serve" or done.stdout == ""  # serve announces before it opens
        assert _password(t.url) not in done.stdout
        lines = done.stderr.strip().splitlines()
        # The repair hint names the store as the variable (saihm/storage/hint.py), never the URL.
        hint = 'saihm rebuild --data DIR --store "$SAIHM_STORE" --replace'
        assert len(lines) == 1 and hint in lines[0], done.stderr
        assert _password(t.url) not in done.stderr
    # Nothing was written by the refusals: the rows are the edited ones still.
    assert len(raw.rows(b"leaves")) == len([r for r in t.rows if r[0] == raw.ids[b"leaves"]]) - 3


# -- servers: a running node, a second node started after the edit, a monitor ----------------


def test_a_running_node_and_a_second_node_started_after_the_edit_both_refuse_it(
    t: Template, raw: Raw, tmp_path: Path
) -> None:
    """Node A serves; the grant record is flipped under it; node B starts on the same store.
    Neither node lets the grant's token read (the record no longer opens), both keep serving
    every other token exactly as before, and each refusal is the protocol's error body."""
    p = t.p
    baseline: dict[str, frozenset[str] | None] = p.baseline  # type: ignore[attr-defined]
    env = {"SAIHM_STORE": t.url}
    args = ("--data", str(t.data))
    with serving(tmp_path, *args, env=env, name="a") as (_, url_a):
        status, body = post(url_a, p.tokens["a_all"], "saihm_recall", {})
        assert status == 200 and {c["plaintext"] for c in body} == baseline["a_all"]
        _flip_a_projection_record(t.p, raw)
        with serving(tmp_path, *args, env=env, name="b") as (_, url_b):
            for url in (url_b, url_a):
                status, body = post(url, p.tokens["a_all"], "saihm_recall", {})
                assert status == 401 and body == {"error": "unauthenticated"}, (url, body)
                status, body = post(url, p.tokens["bob"], "saihm_recall", {})
                assert status == 200 and {c["plaintext"] for c in body} == baseline["bob"]
    for name in ("a", "b"):
        err = (tmp_path / f"{name}.err").read_text()
        assert "Traceback" not in err and _password(t.url) not in err


def test_a_monitor_catches_the_store_restored_to_an_older_copy_of_every_row(
    t: Template, raw: Raw, tmp_path: Path
) -> None:
    """The PostgreSQL form of tests/audit/test_monitor.py's rollback: the attacker restores
    every row of an older copy of the database (log, projections and checkpoints alike, so the
    store opens and verifies on its own); the monitor holding the newer checkpoint alarms."""
    older = raw.snapshot()
    state = tmp_path / "monitor"
    env = {"SAIHM_STORE": t.url}
    args = ("--data", str(t.data))
    with serving(tmp_path, *args, env=env, name="a") as (_, url):
        assert post(url, t.p.tokens["bob"], "saihm_remember", {"content": "after"})[0] == 200
        held = check_once(url.rstrip("/"), state)
        assert held.ok, held.alarms
    raw.restore(older)
    with serving(tmp_path, *args, env=env, name="b") as (_, url):
        result = check_once(url.rstrip("/"), state)
    assert not result.ok
    assert str(result.alarms[0]).startswith("rollback: checkpoint size ")
    assert f"< held checkpoint size {held.size}" in str(result.alarms[0])


# -- a wrong password ---------------------------------------------------------------------------


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "--no-progress"],
        ["session", "open", "--holder", "00" * 32],
        ["holder", "create"],
        ["rebuild"],
        ["serve", "--port", "0"],
    ],
    ids=lambda a: a[0],
)
def test_a_store_url_with_a_wrong_password_is_one_line_without_either_password(
    t: Template, argv: list[str]
) -> None:
    wrong = "wrong-" + _password(t.url)[::-1]
    url = _with_password(t.url, wrong)
    done = _run(argv[0], *argv[1:], "--data", str(t.data), "--store", url, timeout=60)
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert wrong not in done.stderr and _password(t.url) not in done.stderr
    assert "postgresql://" in lines[0] or "store" in lines[0], lines[0]


# -- the namespace and meta tables: a revocation must not be lost (issue 21, item 4) -----------


def _table_edit(statement: str, *names: bytes) -> Any:
    def edit(raw: Raw) -> None:
        with raw.conn.transaction():
            raw.conn.execute(statement, names)

    return edit


_REVOKED, _GRANTS, _META = PJ.REVOKED, PJ.GRANTS, PJ.META
_SWAP = (
    "UPDATE saihm_namespace SET id = CASE WHEN name = %s THEN -1 ELSE -2 END WHERE name IN (%s, %s)"
)
TABLE_EDITS: dict[str, Any] = {
    "delete_the_revocation_row": lambda raw: raw.set(_REVOKED, raw.rows(_REVOKED)[0][0], None),
    "renumber_the_revocations": _table_edit(
        "UPDATE saihm_namespace SET id = id + 1000 WHERE name = %s", _REVOKED
    ),
    "delete_the_revocations_namespace": _table_edit(
        "DELETE FROM saihm_namespace WHERE name = %s", _REVOKED
    ),
    "renumber_meta": _table_edit(
        "UPDATE saihm_namespace SET id = id + 1000 WHERE name = %s", _META
    ),
    "delete_the_meta_namespace": _table_edit("DELETE FROM saihm_namespace WHERE name = %s", _META),
}


def _swap(a: bytes, b: bytes) -> Any:
    """Give namespaces ``a`` and ``b`` each other's number (two steps through free numbers)."""

    def edit(raw: Raw) -> None:
        ia, ib = raw.ids[a], raw.ids[b]
        with raw.conn.transaction():
            raw.conn.execute(_SWAP, (a, a, b))
            for name, ident in ((a, ib), (b, ia)):
                raw.conn.execute(
                    "UPDATE saihm_namespace SET id = %s WHERE name = %s", (ident, name)
                )

    return edit


TABLE_EDITS.update(
    swap_the_revocations_with_grants=_swap(_REVOKED, _GRANTS),
    swap_the_revocations_with_meta=_swap(_REVOKED, _META),
    delete_the_schema_version=lambda raw: raw.conn.execute("DELETE FROM saihm_meta"),
    edit_the_schema_version=lambda raw: raw.conn.execute("UPDATE saihm_meta SET value = '2'"),
)


@pytest.fixture
def tables(raw: Raw) -> Iterator[None]:
    """Put ``saihm_namespace`` and ``saihm_meta`` back as they were after the test."""
    names = raw.conn.execute("SELECT id, name FROM saihm_namespace").fetchall()
    meta = raw.conn.execute("SELECT key, value FROM saihm_meta").fetchall()
    yield
    with raw.conn.transaction():
        raw.conn.execute("DELETE FROM saihm_namespace")
        raw.conn.execute("DELETE FROM saihm_meta")
        with raw.conn.cursor() as cur:
            cur.executemany("INSERT INTO saihm_namespace (id, name) VALUES (%s, %s)", names)
            cur.executemany("INSERT INTO saihm_meta (key, value) VALUES (%s, %s)", meta)


@pytest.mark.parametrize("name", sorted(TABLE_EDITS))
def test_an_edit_of_the_namespace_or_meta_tables_shows_no_token_more(
    t: Template, raw: Raw, tables: None, name: str
) -> None:
    """A deleted revocation row, or the revocation (or meta) namespace renumbered, swapped
    or deleted in ``saihm_namespace``, or ``saihm_meta`` edited: a store opened afterwards
    lets no token see more than before, and the revoked session stays refused (the sealed
    revocation count in ``p_meta`` no longer matches, or the store refuses to open)."""
    TABLE_EDITS[name](raw)
    views = t.p.views_reopened()
    baseline: dict[str, frozenset[str] | None] = t.p.baseline  # type: ignore[attr-defined]
    assert views["a_revoked"] is None
    for token, seen in views.items():
        assert seen is None or seen <= (baseline[token] or frozenset()), (token, seen)


def test_a_revocation_row_deleted_under_a_running_node_is_refused_by_it_and_a_second_node(
    t: Template, raw: Raw, tmp_path: Path
) -> None:
    """Two processes: node A has seen the revocation when its row is deleted; it still refuses
    the revoked token (401). Node B, started after the edit, refuses every token (503: the
    sealed count of revocations no longer matches the rows)."""
    p = t.p
    env = {"SAIHM_STORE": t.url}
    args = ("--data", str(t.data))
    with serving(tmp_path, *args, env=env, name="a") as (_, url_a):
        assert post(url_a, p.tokens["a_revoked"], "saihm_recall", {})[0] == 401
        TABLE_EDITS["delete_the_revocation_row"](raw)
        assert post(url_a, p.tokens["a_revoked"], "saihm_recall", {})[0] == 401
        assert post(url_a, p.tokens["bob"], "saihm_recall", {})[0] == 200
        with serving(tmp_path, *args, env=env, name="b") as (_, url_b):
            for token in ("a_revoked", "bob"):
                status, body = post(url_b, p.tokens[token], "saihm_recall", {})
                assert (status, body) == (503, {"error": "operator_storage_unavailable"})
    for node in ("a", "b"):
        err = (tmp_path / f"{node}.err").read_text()
        assert "Traceback" not in err and _password(t.url) not in err


# -- verify answers every stored state (issue 21, item 5a) -------------------------------------


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(seed=st.integers(0, 2**32 - 1), pick=st.integers(0, 2**16))
def test_verify_data_store_never_exits_with_an_internal_error(
    t: Template, raw: Raw, capsys, seed: int, pick: int
) -> None:
    """A ``saihm_kv`` row edit drawn by hypothesis (``random_edits`` with inserted rows, so a
    leaf row copied under another key among them): ``verify --data --store`` exits 0 or 1,
    never 70."""
    tables = [(name, raw.rows(name)) for name in raw.names()]
    edits = random_edits(tables, random.Random(seed), insert=True)
    name, _, changes = edits[pick % len(edits)]
    for key, value in changes:
        raw.set(name, key, value)
    try:
        assert verify_code(capsys, t.store_args) in (0, 1)
    finally:
        raw.restore(t.rows)


@pytest.mark.parametrize(("source", "target"), [(0, "end"), (-1, 0), (2, "gap")], ids=str)
def test_a_duplicated_leaf_row_is_a_finding_not_an_internal_error(
    t: Template, raw: Raw, capsys, source: int, target: object
) -> None:
    leaves = raw.rows(b"leaves")
    where = {"end": len(leaves), "gap": len(leaves) + 3}.get(target, target)  # type: ignore[arg-type]
    raw.set(b"leaves", u64(where), leaves[source][1])  # type: ignore[arg-type]
    assert verify_code(capsys, t.store_args) == 1
