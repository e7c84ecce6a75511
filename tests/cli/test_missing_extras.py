"""Every optional path of the command line, run without its extra, is one line naming the
install command (issue 25 item 3), never a traceback: each case blocks the extra's module in a
fresh interpreter (``sys.modules[name] = None``, as if it were not installed) and runs the
command there."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from saihm.commands.main import main
from saihm.compose import initialise
from saihm.config import Config
from tests.support.cli import one_line_refusal
from tests.support.postgres import lmdb_only

ROOT = Path(__file__).resolve().parents[2]
RUN_BLOCKED = (
    "import sys\n"
    "for name in sys.argv[1].split(','):\n"
    "    sys.modules[name] = None\n"
    "sys.argv = ['saihm', *sys.argv[2:]]\n"
    "from saihm.commands.main import main\n"
    "sys.exit(main())\n"
)

#: (extra, the modules it installs that saihm imports, the command that needs them). DATA is
#: replaced by a data directory as ``saihm serve`` leaves it.
CASES = [
    ("bench", "rank_bm25", ["bench", "recall", "--skip-latency"]),
    ("bench", "pymerkle", ["bench", "translog", "--leaves", "10", "--samples", "1"]),
    ("audit", "pqcrypto", ["verify", "--data", "DATA", "--second-implementation"]),
    ("s3", "boto3", ["publish", "--data", "DATA", "--to", "s3://bucket/prefix"]),
    pytest.param(
        "postgresql",
        "psycopg,psycopg_pool",
        ["rebuild", "--data", "DATA", "--store", "postgresql://nobody@127.0.0.1:1/none"],
        marks=lmdb_only(
            "the pass gives DATA a PostgreSQL store of its own, so this --store is refused as "
            "another store before psycopg is needed"
        ),
    ),
    ("semantic", "onnxruntime,tokenizers", ["serve", "--data", "DATA", "--embedding-model", "."]),
    ("research", "pyarrow", ["replay", "DATA", "--format", "parquet", "--out", "DATA/../dataset"]),
]

#: Extras that no command needs: the test toolchain and the framework adapters, which are
#: libraries (tests/integrations/test_extras.py checks their one-line ImportError).
NOT_COMMANDS = {
    "test",
    "integrations-test",
    "langchain",
    "langgraph",
    "llamaindex",
    "openai-agents",
}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data directory as ``saihm serve`` leaves it, with one holder in its store."""
    path = tmp_path / "data"
    initialise(Config.for_data(path))
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["holder", "create", "--data", str(path)]) == 0
    return path


def _modules(case: object) -> str:
    values = case.values if hasattr(case, "values") else case
    return str(values[1])  # type: ignore[index]


@pytest.mark.parametrize(("extra", "modules", "argv"), CASES, ids=[_modules(c) for c in CASES])
def test_a_command_without_its_extra_is_one_line_with_the_install_command(
    extra: str, modules: str, argv: list[str], data: Path
) -> None:
    argv = [str(data) if a == "DATA" else a for a in argv]
    done = subprocess.run(
        [sys.executable, "-c", RUN_BLOCKED, modules, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=data.parent,
    )
    line = one_line_refusal(done)
    assert f"pip install 'saihm[{extra}]'" in line, line


def test_every_extra_a_command_needs_is_walked() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    cases = [c.values if hasattr(c, "values") else c for c in CASES]
    walked = {extra for extra, _, _ in cases}
    assert walked == set(extras["optional-dependencies"]) - NOT_COMMANDS
    # And each package of those extras that saihm imports is blocked by some case.
    imported = set()
    for source in (ROOT / "saihm").rglob("*.py"):
        imported |= set(re.findall(r"^\s*(?:from|import) (\w+)", source.read_text(), re.M))
    blocked = {m for _, modules, _ in cases for m in modules.split(",")}
    optional = {"pqcrypto", "pymerkle", "rank_bm25", "boto3", "psycopg", "psycopg_pool"}
    optional |= {"onnxruntime", "tokenizers"}
    assert optional & imported <= blocked
