"""PostgreSQL for tests: the server named by ``SAIHM_TEST_POSTGRES``, one fresh schema per test.

``.ci/postgres.sh`` starts a throwaway server and prints the ``export`` line to eval. Without
the variable, tests that need PostgreSQL skip with :data:`SKIP_REASON`; under ``CI=true`` they
fail instead (and ``tests/conftest.py`` stops the session at its start), so CI can never pass
by skipping them.

Use the ``postgres_location`` fixture (import it into a conftest or test module), or
:func:`fresh_location` for a location of your own; either is a URL whose ``search_path``
names a schema created for the caller and dropped afterwards, so tests never see each other.

**The store's tests on PostgreSQL.** With ``SAIHM_TEST_STORE=postgresql`` (``.ci/run``'s
second pass), :func:`use_test_store` makes every ``Config.for_data(DIR)`` that names no
``store`` put that data directory's log and state in PostgreSQL: a schema of its own, named
from the run (``SAIHM_TEST_STORE_RUN``, inherited by child processes) and the directory's
path, so a child process given the same directory opens the same schema. The schemas of a
run are dropped when its session ends (:func:`drop_run_schemas`).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import pytest

__all__ = [
    "ENV",
    "SKIP_REASON",
    "STORE_ENV",
    "base_url",
    "ci_missing",
    "copy_test_store",
    "drop_run_schemas",
    "fresh_location",
    "lmdb_only",
    "postgres_location",
    "require_url",
    "store_driver",
    "store_url_for",
    "use_test_store",
    "with_schema",
    "with_settings",
]

ENV = "SAIHM_TEST_POSTGRES"
STORE_ENV = "SAIHM_TEST_STORE"
RUN_ENV = "SAIHM_TEST_STORE_RUN"
DRIVERS = ("lmdb", "postgresql")
SKIP_REASON = "SAIHM_TEST_POSTGRES is not set (run .ci/postgres.sh)"
CI_REASON = (
    "SAIHM_TEST_POSTGRES is not set under CI=true: .ci/run must start PostgreSQL with "
    ".ci/postgres.sh and export it; the PostgreSQL tests may not skip in CI"
)


def base_url() -> str | None:
    """The test server's URL, or None when it is not configured."""
    return os.environ.get(ENV) or None


def ci_missing() -> bool:
    """True when running in CI (``CI=true``) without a test server: the run must fail."""
    return os.environ.get("CI") == "true" and base_url() is None


def require_url() -> str:
    """The test server's URL; skips the test without one (fails it under ``CI=true``)."""
    url = base_url()
    if url is None:
        if ci_missing():
            pytest.fail(CI_REASON, pytrace=False)
        pytest.skip(SKIP_REASON)
    return url


def with_schema(url: str, schema: str) -> str:
    """``url`` with its ``search_path`` set to ``schema`` (libpq's ``options`` parameter)."""
    return with_settings(url, search_path=schema)


def with_settings(url: str, **settings: str) -> str:
    """``url`` whose sessions set these server settings (``-c NAME=VALUE`` added to libpq's
    ``options`` parameter), e.g. ``with_settings(url, lock_timeout="1s")``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "options"]
    given = dict(parse_qsl(parts.query)).get("options", "")
    added = " ".join(f"-c {name}={value}" for name, value in settings.items())
    query.append(("options", f"{given} {added}".strip()))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def _admin(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SET lock_timeout = '20s'")
        conn.execute(statement)


@contextmanager
def fresh_location(url: str | None = None) -> Iterator[str]:
    """A URL of a new, empty schema on the test server (``url``, or the configured one),
    dropped with everything in it when the block ends."""
    base = url or require_url()
    schema = f"saihm_t_{secrets.token_hex(6)}"
    _admin(base, f'CREATE SCHEMA "{schema}"')
    try:
        yield with_schema(base, schema)
    finally:
        try:
            _admin(base, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        except Exception as err:  # a test left a transaction open; the schema is harmless
            print(f"schema {schema} not dropped: {type(err).__name__}")


@pytest.fixture
def postgres_location() -> Iterator[str]:
    """A fresh PostgreSQL location (a URL) for one test."""
    with fresh_location() as location:
        yield location


def store_driver() -> str:
    """The driver the store's tests run on: ``SAIHM_TEST_STORE`` (default ``lmdb``)."""
    driver = os.environ.get(STORE_ENV) or "lmdb"
    if driver not in DRIVERS:
        raise pytest.UsageError(f"{STORE_ENV}={driver}: expected one of {', '.join(DRIVERS)}")
    return driver


def lmdb_only(reason: str) -> pytest.MarkDecorator:
    """Skip a store test in the PostgreSQL pass, saying why it is about LMDB alone (a map
    size, a file on disk) or what it still lacks there."""
    return pytest.mark.skipif(
        store_driver() == "postgresql", reason=f"LMDB only under SAIHM_TEST_STORE: {reason}"
    )


def _run_prefix() -> str:
    run = os.environ.get(RUN_ENV)
    if not run:
        run = secrets.token_hex(4)
        os.environ[RUN_ENV] = run  # child processes inherit it
    return f"saihm_s_{run}_"


_created: set[str] = set()


def store_url_for(data_dir: str | Path) -> str:
    """The PostgreSQL location of the data directory ``data_dir`` in this run (its schema
    is created on first use, by whichever process asks first)."""
    url = base_url()
    if url is None:
        raise pytest.UsageError(f"{STORE_ENV}=postgresql needs {ENV}: {SKIP_REASON}")
    digest = hashlib.sha256(str(Path(data_dir).absolute()).encode()).hexdigest()[:16]
    schema = _run_prefix() + digest
    if schema not in _created:
        _admin(url, f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        _created.add(schema)
    return with_schema(url, schema)


def use_test_store() -> None:
    """Under ``SAIHM_TEST_STORE=postgresql``: ``Config.for_data(DIR)`` without a ``store``
    option gets ``store=store_url_for(DIR)``, in this process and (through ``PYTHONPATH``
    and ``tests/support/pgsite/sitecustomize.py``) every Python process it starts.
    Idempotent; nothing happens on ``lmdb``."""
    if store_driver() != "postgresql":
        return
    _run_prefix()  # fixes the run's name before any child inherits the environment
    site = Path(__file__).with_name("pgsite")
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(site) not in paths:
        root = str(Path(__file__).resolve().parents[2])
        os.environ["PYTHONPATH"] = os.pathsep.join([str(site), root, *filter(None, paths)])
    from saihm.config import Config

    original = Config.__dict__["for_data"].__func__
    if getattr(original, "_saihm_test_store", False):
        return

    def for_data(cls: type[Config], data_dir: str | Path, *args: Any, **options: Any) -> Config:
        if options.get("store") is None:
            options["store"] = store_url_for(data_dir)
        return original(cls, data_dir, *args, **options)  # type: ignore[no-any-return]

    for_data._saihm_test_store = True  # type: ignore[attr-defined]
    for_data.__doc__ = original.__doc__
    Config.for_data = classmethod(for_data)  # type: ignore[assignment, method-assign]


def drop_run_schemas() -> None:
    """Drop every schema this run created (any process of it); errors are only printed."""
    url, run = base_url(), os.environ.get(RUN_ENV)
    if url is None or not run:
        return
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute("SET lock_timeout = '20s'")
            rows = conn.execute(
                "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)",
                (_run_prefix(),),
            ).fetchall()
            for (schema,) in rows:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except Exception as err:
        print(f"the run's schemas were not all dropped: {type(err).__name__}")


def copy_test_store(source_dir: str | Path, target_dir: str | Path) -> None:
    """Under ``SAIHM_TEST_STORE=postgresql``: make ``target_dir``'s store a copy of
    ``source_dir``'s (a test that copies a data directory copies its store with it; the
    source must be closed). Nothing happens on ``lmdb``: the copy of the directory is enough.

    The copy's ``store-elsewhere`` marker, copied with the directory, names the source's
    store; it is made to name the copy's, as an operator who moves a directory to another
    store does (the store refuses a directory that names another store)."""
    if store_driver() != "postgresql":
        return
    import psycopg

    from saihm.storage.url import ELSEWHERE, record_store_elsewhere

    marker = Path(target_dir) / ELSEWHERE
    if marker.is_file():
        marker.unlink()
        record_store_elsewhere(target_dir, store_url_for(target_dir))

    source, target = (
        dict(parse_qsl(urlsplit(store_url_for(d)).query))["options"].split("=", 1)[1]
        for d in (source_dir, target_dir)
    )
    url = base_url()
    assert url is not None
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn, conn.transaction():
        for table in ("saihm_meta", "saihm_namespace", "saihm_kv"):
            conn.execute(f'DROP TABLE IF EXISTS "{target}".{table}')
            conn.execute(f'CREATE TABLE "{target}".{table} (LIKE "{source}".{table} INCLUDING ALL)')
            conn.execute(f'INSERT INTO "{target}".{table} SELECT * FROM "{source}".{table}')
        conn.execute(
            "SELECT setval(pg_get_serial_sequence(%s, 'id'), max(id)) FROM "
            f'"{target}".saihm_namespace',
            (f'"{target}".saihm_namespace',),
        )
