"""DESIGN.md "Layers": imports point down only, and the verifier and client stay independent."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "saihm"

# What each package may import from saihm (besides itself and the shared leaves).
SHARED = {"saihm.errors", "saihm.mldsa", "saihm"}
FORBIDDEN = {
    "saihm.translog": {
        "events",
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "mcp",
        "audit",
        "provider",
        "cli",
    },
    "saihm.events": {
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "mcp",
        "audit",
        "provider",
        "cli",
    },
    "saihm.keyring": {
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "mcp",
        "audit",
        "provider",
        "cli",
    },
    "saihm.audit": {
        "store",
        "operator",
        "keyring",
        "http",
        "authority",
        "projections",
        "provider",
        "cli",
        "mcp",
    },
    # The witness and the submitter see the log only through translog and a store-shaped
    # protocol; they borrow saihm.http.serve's socket and TLS helpers, nothing else above.
    "saihm.witness": {
        "events",
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "mcp",
        "audit",
        "provider",
        "cli",
    },
    "saihm.mcp": {
        "translog",
        "events",
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "audit",
        "provider",
        "cli",
        "mldsa",
    },
    # The client library obeys the MCP client's rule, and never imports the MCP client.
    "saihm.client": {
        "translog",
        "events",
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "audit",
        "provider",
        "cli",
        "mldsa",
        "mcp",
    },
    # Framework adapters speak only through the client library: they hold no keys.
    "saihm.integrations": {
        "translog",
        "events",
        "keyring",
        "projections",
        "store",
        "operator",
        "authority",
        "http",
        "audit",
        "provider",
        "cli",
        "mldsa",
        "mcp",
    },
}
MCP_FORBIDDEN_THIRD_PARTY = {"cryptography", "lmdb", "pqcrypto", "cbor2"}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # The module name keeps "__init__", so dropping `level` parts gives the package.
                base = module.split(".")[: -node.level]
                names.append(".".join([*base, node.module] if node.module else base))
            elif node.module:
                names.append(node.module)
    return names


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package.split(".")[1]).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down(package: str) -> None:
    bad = []
    for path in _files(package):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "saihm" and len(parts) > 1 and parts[1] in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", ["saihm.mcp", "saihm.client", "saihm.integrations"])
def test_mcp_client_does_no_cryptography_and_opens_no_store(package: str) -> None:
    bad = [
        f"{path.name} imports {name}"
        for path in _files(package)
        for name in _imports(path)
        if name.split(".")[0] in MCP_FORBIDDEN_THIRD_PARTY
    ]
    assert not bad, "\n".join(bad)


def test_translog_verify_imports_nothing_of_saihm() -> None:
    path = ROOT / "translog" / "verify.py"
    assert [n for n in _imports(path) if n.split(".")[0] == "saihm"] == []
