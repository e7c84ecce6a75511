"""The research dataset ``saihm replay --format parquet|csv|jsonl`` writes (docs/formats.md §8).

Three tables, schema version :data:`SCHEMA_VERSION`, the same columns in every format:

- ``events``: one row per receipt, in log order (:data:`EVENT_COLUMNS`); the receipt's detail
  as typed columns (PROPOSE, VOTE, GRANT; KEY's public key);
- ``memories``: one row per cell a REMEMBER receipt names: when it was remembered, forgotten,
  its lifetime and the cell that superseded it (:data:`MEMORY_COLUMNS`);
- ``shares``: one row per contract and grantee known from an ACCEPT or DECLINE receipt (one
  row with no grantee while none answered): made, accepted, declined, revoked
  (:data:`SHARE_COLUMNS`).

Types: ids are lowercase hex text; a time is a UTC timestamp of 1-second resolution: Parquet
``timestamp[ms, tz=UTC]`` (Parquet has no seconds unit; the values are whole seconds); in
JSONL and CSV a decimal string of Unix seconds, as the receipt API
(``GET /log/v1/receipts``) gives ``timestamp``; every other unsigned 64-bit integer likewise a
decimal string in JSONL and CSV, a ``uint64`` in Parquet; ``index`` columns are int64 (numbers
in JSON). A value the log does not carry is null (empty in CSV).

Appending: events go to ``events.jsonl`` / ``events.csv`` (lines appended) or
``events.parquet/part-<first>-<end>.parquet`` (a part file per run); the lifecycle tables are
rewritten whole from the state in ``DIR/.saihm-replay/state.sqlite`` (SQLite, standard library),
which records how many leaves the dataset holds and the right edge of their tree. Writes happen
in this order: the events (:meth:`Dataset.flush`), then the state's commit, once per run; a run
that died in between leaves events past the committed size, which the next run drops first
(:meth:`Dataset.open`), and a run that failed drops them itself (:meth:`Dataset.abandon`), so
nothing is ever duplicated.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cbor2

from saihm.audit.tiletree import TileTree
from saihm.errors import MalformedInput, SaihmError
from saihm.events import Operation

__all__ = [
    "EVENT_COLUMNS",
    "FORMATS",
    "MEMORY_COLUMNS",
    "SCHEMA_VERSION",
    "SHARE_COLUMNS",
    "STATE_DIR",
    "Columns",
    "Dataset",
    "Leaf",
    "check_out",
    "json_value",
    "read_leaf",
]

SCHEMA_VERSION = 1
#: The dataset formats (``lmdb`` is the older projection format, saihm.audit.replay).
FORMATS = ("parquet", "csv", "jsonl")
STATE_DIR = ".saihm-replay"

# (name, kind): kind is one of index, hex, text, time, uint, bool, texts.
EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("index", "index"),
    ("receiptId", "hex"),
    ("operation", "text"),
    ("holderId", "hex"),
    ("subjectId", "hex"),
    ("timestamp", "time"),
    ("publicKey", "hex"),
    ("scope", "text"),
    ("paramKey", "text"),
    ("proposedValue", "text"),
    ("snapshotEpoch", "uint"),
    ("approve", "bool"),
    ("weight", "uint"),
    ("sessions", "text"),
    ("namespaces", "texts"),
    ("expiresAt", "time"),
)
MEMORY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cellId", "hex"),
    ("holderId", "hex"),
    ("remembered", "time"),
    ("rememberedIndex", "index"),
    ("forgotten", "time"),
    ("forgottenIndex", "index"),
    ("lifetimeSeconds", "index"),
    ("supersededBy", "hex"),
)
SHARE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("contractId", "hex"),
    ("fromHolderId", "hex"),
    ("toHolderId", "hex"),
    ("made", "time"),
    ("madeIndex", "index"),
    ("accepted", "time"),
    ("declined", "time"),
    ("revoked", "time"),
)
_DETAILS = tuple(name for name, _ in EVENT_COLUMNS[6:])
_OPERATIONS = frozenset(op.value for op in Operation)


@dataclass(frozen=True)
class Leaf:
    """The fields of a receipt leaf the dataset needs (receipt keys of docs/formats.md §3)."""

    receipt_id: bytes
    subject_id: bytes
    operation: str
    holder_id: bytes
    timestamp: int
    detail: Any


def read_leaf(leaf: bytes) -> Leaf | None:
    """A leaf's receipt fields, or None when it is not a receipt.

    Fast and lenient (``cbor2``): the strict checks (deterministic encoding, receiptId,
    signature) are the verifier's, which ran first unless ``--no-verify`` was given.
    """
    try:
        m = cbor2.loads(leaf)
    except Exception:  # cbor2 raises several types for bad input
        return None
    if not isinstance(m, dict):
        return None
    rid, subject, op, holder, ts = m.get(1), m.get(2), m.get(3), m.get(4), m.get(6)
    if not (isinstance(rid, bytes) and isinstance(subject, bytes) and isinstance(holder, bytes)):
        return None
    if not len(rid) == len(subject) == len(holder) == 32 or op not in _OPERATIONS:
        return None
    if type(ts) is not int or not 0 <= ts < 1 << 63:
        return None
    return Leaf(rid, subject, op, holder, ts, m.get(7))


class Columns:
    """``events`` rows not yet written, column by column (the writers' input); the detail
    columns are sparse (row -> value) until :attr:`data` fills them in."""

    def __init__(self) -> None:
        self.base: dict[str, list[Any]] = {name: [] for name, _ in EVENT_COLUMNS[:6]}
        self.details: dict[str, dict[int, Any]] = {name: {} for name in _DETAILS}
        self.rows = 0

    def add(self, index: int, leaf: Leaf) -> None:
        b = self.base
        b["index"].append(index)
        b["receiptId"].append(leaf.receipt_id.hex())
        b["operation"].append(leaf.operation)
        b["holderId"].append(leaf.holder_id.hex())
        b["subjectId"].append(leaf.subject_id.hex())
        b["timestamp"].append(leaf.timestamp)
        detail = leaf.detail
        if detail is not None:
            row, details = self.rows, self.details
            if isinstance(detail, bytes):
                details["publicKey"][row] = detail.hex()
            elif isinstance(detail, dict):
                for key, value in detail.items():
                    if key in details:
                        details[key][row] = value
        self.rows += 1

    @property
    def data(self) -> dict[str, list[Any]]:
        """Every column as a list of ``rows`` values (None where the log carries none)."""
        out = dict(self.base)
        for name, sparse in self.details.items():
            out[name] = [sparse.get(i) for i in range(self.rows)] if sparse else [None] * self.rows
        return out

    def as_rows(self) -> list[dict[str, Any]]:
        data = self.data
        names = [name for name, _ in EVENT_COLUMNS]
        columns = zip(*(data[name] for name in names), strict=True)
        return [dict(zip(names, values, strict=True)) for values in columns]


def json_value(kind: str, value: Any) -> Any:
    """A value as JSONL (and CSV) carry it: uints and times as decimal strings."""
    if value is None:
        return None
    if kind in ("uint", "time"):
        return str(value)
    return value


def _csv_value(kind: str, value: Any) -> str:
    if value is None:
        return ""
    if kind == "bool":
        return "true" if value else "false"
    if kind == "texts":
        return json.dumps(value)
    return str(value)


# -- the state ----------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    cell BLOB PRIMARY KEY, holder BLOB NOT NULL, remembered INTEGER NOT NULL,
    rememberedIndex INTEGER NOT NULL, forgotten INTEGER, forgottenIndex INTEGER,
    supersededBy BLOB);
CREATE TABLE IF NOT EXISTS shares (
    contract BLOB PRIMARY KEY, holder BLOB NOT NULL, made INTEGER NOT NULL,
    madeIndex INTEGER NOT NULL, revoked INTEGER);
CREATE TABLE IF NOT EXISTS responses (
    contract BLOB NOT NULL, holder BLOB NOT NULL, accepted INTEGER, declined INTEGER,
    PRIMARY KEY (contract, holder));
"""


_REMEMBER = (
    "INSERT OR IGNORE INTO memories (cell, holder, remembered, rememberedIndex) VALUES (?, ?, ?, ?)"
)
_FORGET = (
    "UPDATE memories SET forgotten = ?, forgottenIndex = ?, supersededBy = ? "
    "WHERE cell = ? AND forgotten IS NULL"
)
_SHARE = "INSERT OR IGNORE INTO shares (contract, holder, made, madeIndex) VALUES (?, ?, ?, ?)"
_REVOKE = "UPDATE shares SET revoked = ? WHERE contract = ? AND revoked IS NULL"
_RESPOND = "INSERT OR IGNORE INTO responses (contract, holder) VALUES (?, ?)"
_ACCEPT = "UPDATE responses SET accepted = ? WHERE contract = ? AND holder = ? AND accepted IS NULL"
_DECLINE = (
    "UPDATE responses SET declined = ? WHERE contract = ? AND holder = ? AND declined IS NULL"
)


@dataclass
class _Prev:
    """The last leaf applied: a FORGET right after its holder's REMEMBER of the same second is
    how ``remember(..., supersedes=)`` appears in the log (one commit, adjacent leaves)."""

    index: int = -1
    operation: str = ""
    holder: bytes = b""
    subject: bytes = b""
    timestamp: int = -1


class Dataset:
    """One dataset directory: its state, its event writer and its lifecycle tables."""

    def __init__(self, out: Path, fmt: str) -> None:
        self.out, self.format = out, fmt
        self.db = sqlite3.connect(out / STATE_DIR / "state.sqlite", isolation_level=None)
        self.db.executescript(_SCHEMA)
        self.db.execute("BEGIN")
        self.size = int(self.meta("size") or 0)
        self.prev = _Prev(**json.loads(self.meta("prev") or "{}", object_hook=_unhex))
        self.pending = Columns()
        self.ops: list[tuple[str, tuple[Any, ...]]] = []
        self.first = self.size

    @classmethod
    def open(cls, out: Path, fmt: str, origin: str) -> Dataset:
        """Open (or start) the dataset in ``out``; refuse another format or another log, and
        drop events a run wrote past the committed size."""
        check_out(out)
        (out / STATE_DIR).mkdir(parents=True, exist_ok=True)
        data = cls(out, fmt)
        held_format, held_origin = data.meta("format"), data.meta("origin")
        if held_format is not None and held_format != fmt:
            data.close()
            raise SaihmError(f"{out} holds a {held_format} dataset: use --format {held_format}")
        if held_origin is not None and held_origin != origin:
            data.close()
            raise SaihmError(f"{out} holds a replay of the log {held_origin!r}, not {origin!r}")
        if int(data.meta("schema") or SCHEMA_VERSION) != SCHEMA_VERSION:
            data.close()
            raise SaihmError(f"{out} holds another dataset schema version: use a new --out")
        data._drop_uncommitted()
        return data

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def _drop_uncommitted(self) -> None:
        if self.format == "parquet":
            for part in (self.out / "events.parquet").glob("part-*.parquet"):
                if int(part.stem.split("-")[1]) >= self.size:
                    part.unlink()
            return
        path = self.out / f"events.{self.format}"
        offset = int(self.meta("offset") or 0)
        if path.exists() and offset == 0:
            path.unlink()  # no committed events: no file (a CSV header is written with the first)
        elif path.exists() and path.stat().st_size > offset:
            with path.open("r+b") as f:
                f.truncate(offset)

    # -- applying leaves -------------------------------------------------------------------------

    def add(self, index: int, leaf: Leaf) -> None:
        """Account for leaf ``index`` (call in log order, from ``self.size``)."""
        self.pending.add(index, leaf)
        op, subject, holder, ts = leaf.operation, leaf.subject_id, leaf.holder_id, leaf.timestamp
        queue = self.ops.append
        if op == Operation.REMEMBER:
            queue((_REMEMBER, (subject, holder, ts, index)))
        elif op == Operation.FORGET:
            p = self.prev
            by = None
            if (
                p.index == index - 1
                and p.operation == Operation.REMEMBER.value
                and p.holder == holder
                and p.timestamp == ts
                and p.subject != subject
            ):
                by = p.subject
            queue((_FORGET, (ts, index, by, subject)))
        elif op == Operation.SHARE:
            queue((_SHARE, (subject, holder, ts, index)))
        elif op == Operation.REVOKE:
            queue((_REVOKE, (ts, subject)))
        elif op in (Operation.ACCEPT, Operation.DECLINE):
            queue((_RESPOND, (subject, holder)))
            queue((_ACCEPT if op == Operation.ACCEPT else _DECLINE, (ts, subject, holder)))
        self.prev = _Prev(index, op, holder, subject, ts)
        self.size = index + 1

    def _apply(self) -> None:
        """Run the queued state changes, consecutive ones of a kind in one executemany."""
        ops, start = self.ops, 0
        while start < len(ops):
            sql, end = ops[start][0], start + 1
            while end < len(ops) and ops[end][0] == sql:
                end += 1
            self.db.executemany(sql, [params for _, params in ops[start:end]])
            start = end
        self.ops = []

    def skip(self, index: int) -> None:
        """Leaf ``index`` is not a receipt (only without verification): no row, but counted."""
        self.size = index + 1

    def tree(self) -> TileTree | None:
        """The right edge of the tree of the events held (``commit(tree=)``), or None when the
        state has none for its size (a dataset of an older saihm)."""
        raw = self.meta("tree")
        if raw is None:
            return None
        try:
            tree = TileTree.from_bytes(bytes.fromhex(raw))
        except (ValueError, MalformedInput):
            return None
        return tree if tree.size == self.size else None

    def flush(self) -> None:
        """Write the pending events and queue their state, uncommitted: :meth:`commit` counts
        them, :meth:`abandon` drops them."""
        self._apply()
        if self.pending.rows:
            self._write_events(self.pending)
        self.pending, self.first = Columns(), self.size

    def abandon(self) -> None:
        """Undo everything since the last commit: the state rolled back, the events written
        since (``flush``) dropped, as :meth:`open` drops a dead run's."""
        self.db.execute("ROLLBACK")
        self.db.execute("BEGIN")
        self.ops, self.pending = [], Columns()
        self.size = int(self.meta("size") or 0)
        self.prev = _Prev(**json.loads(self.meta("prev") or "{}", object_hook=_unhex))
        self.first = self.size
        self._drop_uncommitted()

    def commit(self, origin: str, note: str | None, verified: bool, tree: bytes) -> None:
        """Write the pending events, then commit the state (module docstring: the order) with
        ``tree``, the right edge of the tree of every event held (``TileTree.to_bytes``)."""
        self.flush()
        self.set_meta("tree", tree.hex())
        self.set_meta("size", str(self.size))
        self.set_meta("format", self.format)
        self.set_meta("origin", origin)
        self.set_meta("schema", str(SCHEMA_VERSION))
        self.set_meta("verified", "1" if verified else "0")
        if note is not None:
            self.set_meta("checkpoint", note)
        p = self.prev
        prev = {
            "index": p.index,
            "operation": p.operation,
            "holder": p.holder.hex(),
            "subject": p.subject.hex(),
            "timestamp": p.timestamp,
        }
        self.set_meta("prev", json.dumps(prev))
        if self.format != "parquet":
            path = self.out / f"events.{self.format}"
            self.set_meta("offset", str(path.stat().st_size if path.exists() else 0))
        self.db.execute("COMMIT")
        self.db.execute("BEGIN")

    def close(self) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
        self.db.close()

    # -- writing ---------------------------------------------------------------------------------

    def _write_events(self, columns: Columns) -> None:
        if self.format == "parquet":
            directory = self.out / "events.parquet"
            directory.mkdir(exist_ok=True)
            name = f"part-{self.first:012d}-{self.size:012d}.parquet"
            _write_parquet(directory / name, EVENT_COLUMNS, columns.data)
        else:
            with (self.out / f"events.{self.format}").open("a", newline="") as f:
                new = f.tell() == 0
                f.write(_text(self.format, EVENT_COLUMNS, columns.as_rows(), header=new))
                f.flush()
                os.fsync(f.fileno())

    def lifecycle(self) -> dict[str, int]:
        """Rewrite ``memories`` and ``shares`` from the state; return their row counts."""
        memories = list(self._memories())
        shares = list(self._shares())
        for name, columns, rows in (
            ("memories", MEMORY_COLUMNS, memories),
            ("shares", SHARE_COLUMNS, shares),
        ):
            target = self.out / f"{name}.{self.format}"
            tmp = target.with_name(target.name + ".tmp")
            if self.format == "parquet":
                _write_parquet(tmp, columns, {n: [r[n] for r in rows] for n, _ in columns})
            else:
                tmp.write_text(_text(self.format, columns, rows, header=True))
            tmp.replace(target)
        return {"memories": len(memories), "shares": len(shares)}

    def _memories(self) -> Iterator[dict[str, Any]]:
        query = (
            "SELECT cell, holder, remembered, rememberedIndex, forgotten, forgottenIndex, "
            "supersededBy FROM memories ORDER BY rememberedIndex"
        )
        for cell, holder, made, made_at, gone, gone_at, by in self.db.execute(query):
            yield {
                "cellId": cell.hex(),
                "holderId": holder.hex(),
                "remembered": made,
                "rememberedIndex": made_at,
                "forgotten": gone,
                "forgottenIndex": gone_at,
                "lifetimeSeconds": None if gone is None else gone - made,
                "supersededBy": None if by is None else by.hex(),
            }

    def _shares(self) -> Iterator[dict[str, Any]]:
        query = (
            "SELECT s.contract, s.holder, r.holder, s.made, s.madeIndex, r.accepted, "
            "r.declined, s.revoked FROM shares s LEFT JOIN responses r "
            "ON r.contract = s.contract ORDER BY s.madeIndex, r.rowid"
        )
        for contract, holder, to, made, at, accepted, declined, revoked in self.db.execute(query):
            yield {
                "contractId": contract.hex(),
                "fromHolderId": holder.hex(),
                "toHolderId": None if to is None else to.hex(),
                "made": made,
                "madeIndex": at,
                "accepted": accepted,
                "declined": declined,
                "revoked": revoked,
            }


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that is a file, or a directory holding anything but a dataset."""
    if out.exists() and not out.is_dir():
        raise SaihmError(f"--out {out} is a file, not a directory")
    known = out / STATE_DIR / "state.sqlite"
    others = out.is_dir() and any(p.name != STATE_DIR for p in out.iterdir())
    if others and not known.exists():
        raise SaihmError(f"--out {out} is not empty and holds no saihm replay dataset")


def _unhex(obj: dict[str, Any]) -> dict[str, Any]:
    for key in ("holder", "subject"):
        if key in obj:
            obj[key] = bytes.fromhex(obj[key])
    return obj


def _text(
    fmt: str, columns: Sequence[tuple[str, str]], rows: Sequence[dict[str, Any]], header: bool
) -> str:
    if fmt == "jsonl":
        return "".join(
            json.dumps({name: json_value(kind, row[name]) for name, kind in columns}) + "\n"
            for row in rows
        )
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if header:
        writer.writerow([name for name, _ in columns])
    for row in rows:
        writer.writerow([_csv_value(kind, row[name]) for name, kind in columns])
    return buf.getvalue()


def _arrow_type(kind: str) -> Any:
    import pyarrow as pa

    return {
        "index": pa.int64(),
        "hex": pa.string(),
        "text": pa.string(),
        # Parquet has no seconds unit: whole seconds as milliseconds, adjusted to UTC.
        "time": pa.timestamp("ms", tz="UTC"),
        "uint": pa.uint64(),
        "bool": pa.bool_(),
        "texts": pa.list_(pa.string()),
    }[kind]


def arrow_schema(columns: Sequence[tuple[str, str]]) -> Any:
    """The Parquet (Arrow) schema of a table, with the schema version in its metadata."""
    import pyarrow as pa

    fields = [pa.field(name, _arrow_type(kind)) for name, kind in columns]
    return pa.schema(fields, metadata={"saihm.schema": str(SCHEMA_VERSION)})


def _write_parquet(
    path: Path, columns: Sequence[tuple[str, str]], data: dict[str, list[Any]]
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema(columns)
    arrays = []
    for name, kind in columns:
        values = data[name]
        if kind == "time":
            values = [None if v is None else v * 1000 for v in values]
        arrays.append(pa.array(values, type=_arrow_type(kind)))
    table = pa.Table.from_arrays(arrays, schema=schema)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    with tmp.open("rb") as f:  # on disk before the state that counts it is committed
        os.fsync(f.fileno())
    tmp.replace(path)


def need_pyarrow() -> None:
    """Raise the one-line install message when pyarrow is missing."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("pyarrow") is None:
        raise SaihmError("--format parquet needs pyarrow: pip install 'saihm[research]'")
    importlib.import_module("pyarrow.parquet")  # loaded once, before the run is timed
