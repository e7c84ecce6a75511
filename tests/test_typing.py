"""The type checker's configuration (pyproject.toml ``[tool.mypy]``) stays what it promises:
strict on the core a verifier trusts, run by ``make test``, and an excused list that only names
modules that exist (it must shrink to nothing, so a module that moved or went leaves it)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STRICT_PACKAGES = {"saihm.translog.*", "saihm.events.*", "saihm.keyring.*", "saihm.storage.*"}
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


def test_excused_modules_exist() -> None:
    (excused,) = _overrides(ignore_errors=True)
    missing = []
    for name in excused["module"]:
        path = ROOT.joinpath(*name.split("."))
        if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
            missing.append(name)
    assert not missing, f"remove from the excused list in pyproject.toml: {missing}"
    assert excused["module"] == sorted(excused["module"])
    assert not any(name.endswith("*") for name in excused["module"]), "excuse modules, not trees"


def test_make_test_runs_mypy_before_the_tests() -> None:
    makefile = (ROOT / "Makefile").read_text()
    lint = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/mypy" in lint
    assert "test: lint" in makefile
