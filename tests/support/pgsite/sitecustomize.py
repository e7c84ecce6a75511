"""Started by every Python process of a ``SAIHM_TEST_STORE=postgresql`` test run.

``tests/conftest.py`` puts this directory first on ``PYTHONPATH`` for that run only, so the
processes the tests start (``saihm`` commands, the store's child scripts) map each data
directory to the same PostgreSQL schema as the tests themselves (``tests/support/postgres.py``).
"""

import os

if os.environ.get("SAIHM_TEST_STORE") == "postgresql":
    from tests.support.postgres import use_test_store

    use_test_store()
