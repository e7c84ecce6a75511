"""The type checker's configuration (pyproject.toml ``[tool.mypy]``) stays what it promises:
strict on the core a verifier trusts and on the protocol's JSON edge and HTTP, run by
``make test``, and no module excused (the list of modules not yet clean shrank to nothing in
issue 12 and is gone)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STRICT_PACKAGES = {
    "saihm.translog.*",
    "saihm.events.*",
    "saihm.keyring.*",
    "saihm.storage.*",
    # The edge that turns untrusted JSON into typed values, and the HTTP transport over it.
    "saihm.protocol.*",
    "saihm.http.*",
    # The store, the one read path and the one write path, and the operator's parts, which
    # hold every operation (issue 22).
    "saihm.store",
    "saihm.store.*",
    # The tools run against a stopped store's files (fsck, backup, migrate), strict as they
    # were inside the store (issue 36).
    "saihm.offline.*",
    "saihm.operator.*",
}
#: mypy's ``--strict`` flags that can be set per module.
STRICT_FLAGS = {
    "disallow_any_generics",
    "disallow_subclassing_any",
    "disallow_untyped_calls",
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "disallow_untyped_decorators",
    "warn_return_any",
    "no_implicit_reexport",
    "strict_equality",
    "extra_checks",
}


def _mypy() -> dict[str, Any]:
    config: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return config


def _overrides(**match: object) -> list[dict[str, Any]]:
    return [o for o in _mypy()["overrides"] if all(o.get(k) == v for k, v in match.items())]


def test_the_core_is_checked_strictly_and_the_rest_with_untyped_defs() -> None:
    assert _mypy()["check_untyped_defs"] is True
    strict = [o for o in _mypy()["overrides"] if set(o["module"]) == STRICT_PACKAGES]
    assert len(strict) == 1
    assert all(strict[0].get(flag) is True for flag in STRICT_FLAGS)


def test_no_module_is_excused() -> None:
    """Every module of saihm passes mypy: no override ignores errors, and the only other
    override (besides the strict core's) lets mypy skip libraries that ship no types."""
    assert _overrides(ignore_errors=True) == []
    others = [o for o in _mypy()["overrides"] if set(o["module"]) != STRICT_PACKAGES]
    assert all(set(o) == {"module", "ignore_missing_imports"} for o in others), others
    assert not any(m.startswith("saihm") for o in others for m in o["module"])


def test_make_test_runs_mypy_before_the_tests() -> None:
    makefile = (ROOT / "Makefile").read_text()
    lint = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/mypy" in lint
    assert "test: lint" in makefile
