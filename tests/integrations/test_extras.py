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
