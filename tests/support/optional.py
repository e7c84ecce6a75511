"""Optional test dependencies: skip without them locally, fail without them in CI.

``make test`` installs the ``test`` and ``integrations-test`` extras, so under ``CI=true`` a
missing module is a broken environment, and a suite that skipped its tests would pass without
running them. :func:`require_module` is ``pytest.importorskip`` with that rule, the same one the
PostgreSQL tests (``tests/support/postgres.py``, :func:`~tests.support.postgres.require_url`)
and the browser tests (``tests/explorer/conftest.py``) follow.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

__all__ = ["require_module"]


def require_module(module: str, extra: str) -> ModuleType:
    """Import ``module`` (installed by ``pip install 'saihm[EXTRA]'``) and return it. Without
    it the calling test, or module at import, skips; under ``CI=true`` it fails instead."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        reason = f"{module} is not installed ({type(err).__name__}; pip install 'saihm[{extra}]')"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}: optional tests may not skip in CI", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
