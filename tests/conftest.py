"""Settings shared by the whole suite."""

import pytest
from hypothesis import settings

# Hypothesis' default 200 ms deadline measures the machine, not the code: on a loaded two-core
# runner an example that spawns a parser or signs with ML-DSA can exceed it. Correctness is
# what the property tests check; speed is measured by `saihm bench`.
settings.register_profile("saihm", deadline=None)
settings.load_profile("saihm")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under ``CI=true`` the PostgreSQL tests may not skip: a run without a server fails."""
    from tests.support.postgres import CI_REASON, ci_missing

    if ci_missing():
        pytest.exit(CI_REASON, returncode=1)
