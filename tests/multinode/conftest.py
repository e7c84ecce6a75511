"""The PostgreSQL fixture for the multi-node tests (tests/support/postgres.py)."""

from tests.support.postgres import postgres_location

__all__ = ["postgres_location"]
