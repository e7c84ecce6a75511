"""The test servers (tests/support/serve.py ``serving``) rank lexically unless a test asks
for the default: loading the bundled model is seconds of CPU per server start, paid by every
end-to-end test, and only the tests of the default and of the semantic stage need it."""

from __future__ import annotations

from pathlib import Path

from tests.support.serve import serving


def test_a_test_server_is_lexical_unless_asked(tmp_path: Path) -> None:
    with serving(tmp_path, "--data", str(tmp_path / "data")):
        banner = (tmp_path / "serve.out").read_text()
    assert "saihm: semantic stage off (lexical only)" in banner


def test_the_model_is_kept_when_asked_for_or_named() -> None:
    from tests.support.serve import serve_args

    assert serve_args(("--data", "d"), model=False) == ["--data", "d", "--embedding-model", "none"]
    assert serve_args(("--data", "d"), model=True) == ["--data", "d"]
    named = ("--data", "d", "--embedding-model", "/m")
    assert serve_args(named, model=False) == list(named)
    assert serve_args(("--embedding-model=/m",), model=False) == ["--embedding-model=/m"]
