"""Settings shared by the whole suite."""

import pytest
from hypothesis import settings

# Hypothesis' default 200 ms deadline measures the machine, not the code: on a loaded two-core
# runner an example that spawns a parser or signs with ML-DSA can exceed it. Correctness is
# what the property tests check; speed is measured by `saihm bench`.
settings.register_profile("saihm", deadline=None)
settings.load_profile("saihm")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under ``CI=true`` the PostgreSQL tests may not skip: a run without a server fails.
    With ``SAIHM_TEST_STORE=postgresql`` the store's data goes to PostgreSQL."""
    from tests.support.postgres import (
        CI_REASON,
        ENV,
        SKIP_REASON,
        base_url,
        ci_missing,
        store_driver,
        use_test_store,
    )

    if ci_missing():
        pytest.exit(CI_REASON, returncode=1)
    if store_driver() == "postgresql" and base_url() is None:
        pytest.exit(f"SAIHM_TEST_STORE=postgresql needs {ENV}: {SKIP_REASON}", returncode=1)
    use_test_store()


def pytest_sessionfinish(session: pytest.Session) -> None:
    from tests.support.postgres import drop_run_schemas, store_driver

    if store_driver() == "postgresql":
        drop_run_schemas()
