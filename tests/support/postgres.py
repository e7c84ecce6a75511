"""PostgreSQL for tests: the server named by ``SAIHM_TEST_POSTGRES``, one fresh schema per test.

``.ci/postgres.sh`` starts a throwaway server and prints the ``export`` line to eval. Without
the variable, tests that need PostgreSQL skip with :data:`SKIP_REASON`; under ``CI=true`` they
fail instead (and ``tests/conftest.py`` stops the session at its start), so CI can never pass
by skipping them.

Use the ``postgres_location`` fixture (import it into a conftest or test module), or
:func:`fresh_location` for a location of your own; either is a URL whose ``search_path``
names a schema created for the caller and dropped afterwards, so tests never see each other.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import pytest

__all__ = [
    "ENV",
    "SKIP_REASON",
    "base_url",
    "ci_missing",
    "fresh_location",
    "postgres_location",
    "require_url",
    "with_schema",
]

ENV = "SAIHM_TEST_POSTGRES"
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
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "options"]
    given = dict(parse_qsl(parts.query)).get("options", "")
    options = f"{given} -c search_path={schema}".strip()
    query.append(("options", options))
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
