"""An adapter imported without its framework fails with one line naming the extra
(saihm.integrations.require), whether or not the framework is installed here: the test blocks
the import in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

from saihm.integrations import require


@pytest.mark.parametrize(
    ("blocked", "adapter", "line"),
    [
        (
            "langgraph",
            "saihm.integrations.langgraph",
            "ImportError: langgraph.store.base is not installed: pip install 'saihm[langgraph]'",
        ),
        (
            "llama_index",
            "saihm.integrations.llamaindex",
            "ImportError: llama_index.core is not installed: pip install 'saihm[llamaindex]'",
        ),
        (
            "langchain_core",
            "saihm.integrations.langchain",
            "ImportError: langchain_core is not installed: pip install 'saihm[langchain]'",
        ),
        (
            "agents",
            "saihm.integrations.openai_agents",
            "ImportError: agents is not installed: pip install 'saihm[openai-agents]'",
        ),
    ],
)
def test_an_absent_framework_is_one_line_naming_its_extra(
    blocked: str, adapter: str, line: str
) -> None:
    code = f"import sys; sys.modules[{blocked!r}] = None; import {adapter}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == line


def test_require_returns_the_module_when_present() -> None:
    assert require("json", "nothing").__name__ == "json"
    with pytest.raises(ImportError, match=r"^no_such_module is not installed: pip install "):
        require("no_such_module", "nothing")


def test_the_langgraph_extra_installs_what_the_docs_example_imports() -> None:
    """Issue 25 item 3: ``saihm[langgraph]`` installed only langgraph-checkpoint, while the
    docs' example builds a ``StateGraph`` from ``langgraph.graph`` (the langgraph package)."""
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["langgraph"]
    dists = {re.split(r"[<>=!~\[ ]", spec, maxsplit=1)[0] for spec in extra}
    docs = (root / "docs" / "integrations.md").read_text()
    example = docs.split("### LangGraph", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    # Where each module the example imports comes from.
    provider = {"langgraph.graph": "langgraph", "langgraph.store": "langgraph-checkpoint"}
    imported = re.findall(r"^from (langgraph\.\w+)", example, flags=re.M)
    assert imported and {provider[m] for m in imported} <= dists
