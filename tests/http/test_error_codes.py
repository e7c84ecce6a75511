"""Protocol error codes come from one enum (saihm.errors.ErrorCode)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from saihm.errors import ErrorCode, NotPermitted, SaihmError

ROOT = Path(__file__).resolve().parents[2]
#: The client library and the MCP client relay the operator's codes and name their own kinds
#: of failure; they are not codes the operator sends.
RELAYS = ("saihm/client/", "saihm/mcp/")


def _literal_codes() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "saihm").rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        if where.startswith(RELAYS):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=where)):
            if (isinstance(node, ast.keyword) and node.arg == "code") or (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "code" for t in node.targets)
            ):
                value = node.value
            else:
                continue
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add((where, value.value))
    return found


def test_every_code_saihm_raises_is_a_member_of_the_enum() -> None:
    members = {c.value for c in ErrorCode}
    unknown = sorted((w, c) for w, c in _literal_codes() if c not in members)
    assert unknown == []


def test_every_documented_code_is_a_member_of_the_enum() -> None:
    text = (ROOT / "docs" / "formats.md").read_text()
    section = text[text.index("## 6. Error codes") : text.index("## 7.")]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))
    assert len(documented) > 40
    assert documented - {c.value for c in ErrorCode} == set()


def test_a_code_is_its_string_on_the_wire() -> None:
    import json

    err = NotPermitted("x", code=ErrorCode.NOT_HOLDER)
    assert json.dumps({"error": err.code}) == '{"error": "not_holder"}'
    assert err.code == "not_holder" and str(SaihmError()) == "internal"
