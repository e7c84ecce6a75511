"""The docs' tables of operations agree with the code: a method, tool or receipt operation
added, renamed or re-shaped in the code fails here until its table says so.

- docs/integrations.md "The Python client": one row per method of ``Client`` and
  ``AsyncClient`` (``saihm.client._core``'s request builders and ``call``), each with the
  method's signature as the client has it, the binding method(s) it calls and its result type.
- docs/mcp.md "What each tool reports": one row per MCP tool, the protocol's eight, in order.
- docs/formats.md §3: the receipt's ``operation`` field lists every receipt operation.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path

from saihm.client import AsyncClient, Client
from saihm.client import _core as client_core
from saihm.events import Operation
from saihm.events.operations import METHODS, PROTOCOL_TOOLS
from saihm.mcp.server import TOOL_NAMES

ROOT = Path(__file__).resolve().parents[1]


def _table(doc: str, header: str, after: str = "") -> list[list[str]]:
    """The body rows of the first Markdown table whose header row starts with ``header`` (below
    the first line that starts with ``after``), as cells."""
    lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    begin = next(i for i, line in enumerate(lines) if line.startswith(after))
    start = next(i for i, line in enumerate(lines) if i > begin and line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def _shown(name: str, method: object) -> str:
    """``name(args)`` as the docs write a signature: no annotations, JSON-quoted defaults."""
    parts, star = [], False
    for param in inspect.signature(method).parameters.values():  # type: ignore[arg-type]
        if param.name == "self":
            continue
        if param.kind is param.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        default = param.default
        if default is param.empty:
            parts.append(param.name)
        else:
            parts.append(f"{param.name}={'None' if default is None else json.dumps(default)}")
    return f"{name}({', '.join(parts)})"


def _builds() -> dict[str, str]:
    """Each request builder of the client's core and the binding method its Call names."""
    tree = ast.parse(Path(client_core.__file__).read_text(encoding="utf-8"))
    out = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
            continue
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "Call"
                and isinstance(node.args[0], ast.Constant)
            ):
                out[fn.name] = str(node.args[0].value)
    return out


def _result(method: object) -> str:
    """The method's result type as the docs name it (``Remembered``, ``list[RecalledCell]``)."""
    returns = inspect.signature(method).return_annotation  # type: ignore[arg-type]
    return str(returns).replace("models.", "")


def test_the_client_table_has_one_true_row_per_client_method() -> None:
    builds = _builds()
    assert set(builds.values()) == set(METHODS), "the scan of the builders is broken"
    documented = []
    for first, binding, result in _table("docs/integrations.md", "| Method | Binding call |"):
        shown = re.findall(r"`(\w+)\(([^`]*)\)`", first)
        assert shown, first
        for name, args in shown:
            documented.append(name)
            for kind in (Client, AsyncClient):
                method = getattr(kind, name)
                assert f"{name}({args})" == _shown(name, method), (kind.__name__, name)
            if name == "call":
                assert binding == "any method"
                continue
            for kind in (Client, AsyncClient):
                returns = _result(getattr(kind, name))
                assert result.startswith(f"`{returns}`"), (kind.__name__, name, result)
        called = {builds[name] for name, _ in shown if name in builds}
        assert set(re.findall(r"`(saihm_\w+)`", binding)) >= called, (first, binding)
        assert called <= set(re.findall(r"saihm_\w+", binding.split("(")[0])), (first, binding)
    assert sorted(documented) == sorted([*builds, "call"])


def test_the_mcp_table_has_one_row_per_tool_in_order() -> None:
    rows = _table("docs/mcp.md", "| Tool | Report / statuses |")
    names = tuple(re.fullmatch(r"`(\w+)`", row[0]).group(1) for row in rows)  # type: ignore[union-attr]
    assert names == TOOL_NAMES == PROTOCOL_TOOLS


def test_the_receipt_format_lists_every_operation() -> None:
    rows = _table("docs/formats.md", "| key | field | type |", after="**Receipt**")
    (row,) = [row for row in rows if row[1] == "operation"]
    listed = re.findall(r"\b[A-Z]{3,}\b", row[2])
    assert sorted(listed) == sorted(op.value for op in Operation)
