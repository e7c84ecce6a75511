"""The PostgreSQL driver's tables and statements (see :mod:`saihm.storage.postgres`).

``saihm_kv (ns, k, v)`` holds every namespace, ``saihm_namespace`` numbers them and
``saihm_meta`` records the schema version. All of them live in one schema (the first of the
connection's ``search_path``); every statement names its tables with that schema, so nothing
depends on the ``search_path`` after open.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from saihm.storage.base import MAX_KEY, StorageError

__all__ = ["SCHEMA_VERSION", "Statements", "current_schema", "lock_key", "namespace_ids"]

SCHEMA_VERSION = 1


def lock_key(purpose: str, schema: str) -> int:
    """A signed 64-bit advisory lock key for ``purpose`` in ``schema``."""
    digest = hashlib.sha256(f"saihm:{purpose}:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Statements:
    """The driver's statements, composed once per storage with its schema's table names."""

    def __init__(self, schema: str) -> None:
        kv = sql.Identifier(schema, "saihm_kv")
        self.kv = kv
        self.namespace = sql.Identifier(schema, "saihm_namespace")
        self.meta = sql.Identifier(schema, "saihm_meta")
        self.name = schema
        q = sql.SQL
        self.get = q("SELECT v FROM {} WHERE ns = %b AND k = %b").format(kv)
        # The write transaction's own statements (saihm.storage.postgres._Write): the lock with
        # the transaction id, a prefetch of keys and of namespace ends, and the buffered writes
        # of every namespace as one INSERT and one DELETE.
        self.lock = q("SELECT pg_advisory_xact_lock(%b), pg_current_xact_id()::text")
        self.limits = q("SELECT set_config(%b, %b, true)")
        keys = (
            "SELECT t.ns, t.k, t.v FROM unnest(%b::int4[], %b::bytea[]) AS d(ns, k) "
            "JOIN {} AS t ON t.ns = d.ns AND t.k = d.k"
        )
        ends = (
            "SELECT d.ns, l.k, l.v FROM unnest(%b::int4[]) AS d(ns) LEFT JOIN LATERAL "
            "(SELECT k, v FROM {} WHERE ns = d.ns ORDER BY k DESC LIMIT 1) AS l ON true"
        )
        self.get_many = q(keys).format(kv)
        self.ends = q(ends).format(kv)
        # A read snapshot's prefetch (saihm.storage.postgres._Read.prefetch): both in one
        # statement, the last column telling an end from a key.
        self.prefetch = q(
            "SELECT *, false FROM (" + keys + ") AS fk UNION ALL "
            "SELECT *, true FROM (" + ends + ") AS fe"
        ).format(kv, kv)
        self.put_rows = q(
            "INSERT INTO {} (ns, k, v) SELECT * FROM unnest(%b::int4[], %b::bytea[], %b::bytea[]) "
            "ON CONFLICT (ns, k) DO UPDATE SET v = EXCLUDED.v"
        ).format(kv)
        self.delete_rows = q(
            "DELETE FROM {} AS t USING unnest(%b::int4[], %b::bytea[]) AS d(ns, k) "
            "WHERE t.ns = d.ns AND t.k = d.k"
        ).format(kv)
        self.clear = q("DELETE FROM {} WHERE ns = %b").format(kv)
        self.count = q("SELECT count(*) FROM {} WHERE ns = %b").format(kv)
        self.scans: dict[tuple[bool, bool, bool], sql.Composed] = {}
        for reverse in (False, True):
            for strict in (False, True):
                for bounded in (False, True):
                    low = ">" if strict and not reverse else ">="
                    where = q("ns = %b AND k {} %b").format(q(low))
                    if bounded:
                        where = q("{} AND k < %b").format(where)
                    order = q("DESC" if reverse else "ASC")
                    self.scans[reverse, strict, bounded] = q(
                        "SELECT k, v FROM {} WHERE {} ORDER BY k {} LIMIT %b"
                    ).format(kv, where, order)


def current_schema(conn: psycopg.Connection[Any], where: str) -> str:
    """The schema the storage lives in: the first of the ``search_path`` that exists."""
    row = conn.execute("SELECT current_schema()").fetchone()
    if row is None or row[0] is None:
        raise StorageError(f"PostgreSQL at {where}: no schema of the search_path exists")
    return str(row[0])


def namespace_ids(
    conn: psycopg.Connection[Any],
    statements: Statements,
    namespaces: Sequence[bytes],
    *,
    readonly: bool,
    where: str,
) -> dict[bytes, int]:
    """The number of each namespace, creating the tables and numbering new namespaces first
    unless ``readonly`` (then a namespace never written is simply absent). Creation runs
    under a transaction-level advisory lock: nodes opening a fresh schema at once would
    otherwise race inside ``CREATE TABLE IF NOT EXISTS``. Raises :class:`StorageError` for
    another schema version."""
    ids = _numbered(conn, statements, where)
    if not readonly and (ids is None or set(namespaces) - set(ids)):
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("schema", statements.name),))
            _create(conn, statements, namespaces)
        ids = _numbered(conn, statements, where)
    return ids or {}


def _numbered(
    conn: psycopg.Connection[Any], statements: Statements, where: str
) -> dict[bytes, int] | None:
    """The numbered namespaces, or None when the tables do not exist yet."""
    exists = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (statements.namespace.as_string(conn),)
    ).fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute(
        sql.SQL("SELECT value FROM {} WHERE key = 'schema_version'").format(statements.meta)
    ).fetchone()
    if row is None or row[0] != str(SCHEMA_VERSION):
        found = "none" if row is None else row[0]
        raise StorageError(
            f"PostgreSQL at {where}: schema version {found}, "
            f"this saihm reads version {SCHEMA_VERSION}"
        )
    rows = conn.execute(sql.SQL("SELECT name, id FROM {}").format(statements.namespace))
    return {bytes(name): int(ident) for name, ident in rows}


def _create(
    conn: psycopg.Connection[Any], statements: Statements, namespaces: Sequence[bytes]
) -> None:
    s = statements
    for statement in (
        "CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)",
        "CREATE TABLE IF NOT EXISTS {namespace} ("
        " id integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        " name bytea NOT NULL UNIQUE)",
        "CREATE TABLE IF NOT EXISTS {kv} ("
        " ns integer NOT NULL,"
        f" k bytea NOT NULL CHECK (octet_length(k) BETWEEN 1 AND {MAX_KEY}),"
        " v bytea NOT NULL,"
        " PRIMARY KEY (ns, k))",
    ):
        conn.execute(sql.SQL(statement).format(meta=s.meta, namespace=s.namespace, kv=s.kv))
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (key, value) VALUES ('schema_version', %s) ON CONFLICT DO NOTHING"
        ).format(s.meta),
        (str(SCHEMA_VERSION),),
    )
    with conn.cursor() as cur:
        cur.executemany(
            sql.SQL("INSERT INTO {} (name) VALUES (%s) ON CONFLICT (name) DO NOTHING").format(
                s.namespace
            ),
            [(name,) for name in namespaces],
        )
