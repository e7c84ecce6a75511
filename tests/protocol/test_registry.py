"""The one operation registry (docs/internals.md "Adding an operation"): the binding's rows
(saihm.protocol.BINDINGS) and the pure tables (saihm.events.operations) agree, and every
table that used to be kept by hand is now read from them."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import saihm
from saihm.audit import replay
from saihm.client import AsyncClient, Client
from saihm.client import _async as client_async
from saihm.client import _core as client_core
from saihm.client import _sync as client_sync
from saihm.events import Operation
from saihm.events.operations import (
    METHODS,
    OPERATIONS,
    PROTOCOL_TOOLS,
    public_log_names,
    replay_events,
)
from saihm.http import log_api
from saihm.mcp import server as mcp_server
from saihm.mcp import tools as mcp_tools
from saihm.mcp.server import ANNOTATIONS, TOOL_NAMES
from saihm.operator import (
    AlreadyErased,
    Forgotten,
    GovernanceTools,
    MemoryTools,
    Operator,
    Proposed,
    Recorded,
    Remembered,
    Responded,
    Revoked,
    Shared,
    SharingTools,
    Voted,
)
from saihm.projections import apply
from saihm.protocol import BINDINGS
from saihm.protocol import governance as gov_family
from saihm.protocol import memory as memory_family
from saihm.protocol import sharing as sharing_family
from saihm.protocol.binding import FAMILIES


def test_every_method_has_exactly_one_binding_row() -> None:
    assert list(BINDINGS) == list(METHODS)
    for name, row in BINDINGS.items():
        assert row.method is METHODS[name]


def test_every_receipt_operation_is_in_the_registry() -> None:
    assert set(OPERATIONS) == set(Operation)
    assert {m.operation for m in METHODS.values()} <= set(Operation)


def test_the_mcp_surface_is_the_registrys_eight_protocol_tools() -> None:
    # saihm-protocol "Tool surface (MCP binding)": the eight tools, no extension method.
    assert PROTOCOL_TOOLS == TOOL_NAMES
    assert len(PROTOCOL_TOOLS) == 8 and set(ANNOTATIONS) == set(PROTOCOL_TOOLS)
    # The pinned extension methods (DESIGN.md "HTTP") stay; a new one is an extension too.
    extensions = set(METHODS) - set(PROTOCOL_TOOLS)
    assert extensions >= {
        "saihm_accept_contract",
        "saihm_decline_contract",
        "saihm_record",
        "saihm_forget_session",
    }


def test_governance_methods_are_the_governance_tools() -> None:
    assert {n for n, m in METHODS.items() if m.governance} == {
        "saihm_governance_propose",
        "saihm_governance_vote",
    }


def test_the_public_log_accepts_the_registrys_operation_names() -> None:
    assert log_api._OPERATIONS == public_log_names() == {op.value for op in Operation}


def test_projection_keys_are_read_from_the_registry() -> None:
    assert {
        str(op): spec.projection_key for op, spec in OPERATIONS.items()
    } == apply._OPERATION_KEYS
    # The index keys an operation's entries by name + NUL, so no name's keys can be mistaken
    # for another's (KEY is a prefix of nothing once terminated).
    keys = [spec.projection_key for spec in OPERATIONS.values()]
    assert all(not a.startswith(b) for a in keys for b in keys if a != b)


def test_replay_writes_the_registrys_events() -> None:
    assert replay_events() == replay._EVENTS
    assert replay_events() == {
        Operation.SHARE,
        Operation.REVOKE,
        Operation.ACCEPT,
        Operation.DECLINE,
        Operation.GRANT,
        Operation.UNGRANT,
    }


def test_each_binding_calls_an_operator_method_that_returns_a_typed_result() -> None:
    # The operations speak typed values: no operation is annotated to return a dict or JSON.
    # The operations the binding calls are read from its rows (``op.memory.remember``).
    parts = {"memory": MemoryTools, "sharing": SharingTools, "governance": GovernanceTools}
    called = {
        (node.value.attr, node.attr)
        for family in FAMILIES
        for node in ast.walk(_module_tree(family))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "op"
    }
    assert {part for part, _ in called} == set(parts) and ("memory", "recall") in called
    for part, name in called:
        returns = inspect.signature(getattr(parts[part], name)).return_annotation
        assert "dict" not in str(returns) and "Any" not in str(returns), (name, returns)
    for part in (Operator, *parts.values()):
        assert not hasattr(part, "call")  # the JSON binding lives in saihm.protocol


ids = st.binary(min_size=32, max_size=32)
epochs = st.integers(min_value=0, max_value=(1 << 64) - 1)


def _hex(value: object) -> bytes:
    assert isinstance(value, str) and value == value.lower()
    return bytes.fromhex(value)


@given(ids, st.binary(min_size=32, max_size=32), epochs, st.binary(min_size=16, max_size=16), ids)
def test_remembered_renders_hex_ids_and_decimal_epochs(cell_id, nonce, epoch, prefix, rid):
    out = memory_family.render_remembered(Remembered(cell_id, nonce, "T1", 3, epoch, prefix, rid))
    assert list(out) == [
        "cellId",
        "cellNonce",
        "tier",
        "kekVersion",
        "epoch",
        "signaturePrefix",
        "receiptId",
    ]
    assert _hex(out["cellId"]) == cell_id and _hex(out["cellNonce"]) == nonce
    assert _hex(out["signaturePrefix"]) == prefix and _hex(out["receiptId"]) == rid
    assert out["epoch"] == str(epoch) and int(out["epoch"]) == epoch  # above 2^53 too


@given(ids, epochs, st.integers(0, 1 << 40), st.one_of(st.none(), ids), ids)
def test_recorded_adds_its_chain_after_the_remember_fields(cell_id, epoch, seq, prev, rid):
    r = Recorded(cell_id, cell_id, "T1", 1, epoch, cell_id[:16], rid, seq, prev, "said")
    out = memory_family.render_remembered(r)
    assert list(out)[-3:] == ["seq", "prev", "kind"]
    assert out["seq"] == seq and out["kind"] == "said"
    assert (out["prev"] is None) == (prev is None)
    if prev is not None:
        assert _hex(out["prev"]) == prev


@given(ids, ids, epochs)
def test_forget_renders_success_or_not(cell_id, anchor, epoch):
    assert memory_family.render_forgotten(AlreadyErased()) == {"success": False}
    out = memory_family.render_forgotten(Forgotten(cell_id, anchor, epoch))
    assert out["success"] is True and _hex(out["destructionAnchor"]) == anchor
    assert _hex(out["cellId"]) == cell_id and out["epoch"] == str(epoch)


@given(ids, epochs, st.one_of(st.none(), ids), st.booleans())
def test_repeats_carry_no_receipt_id(contract_id, epoch, receipt, accepted):
    revoked = sharing_family.render_revoked(Revoked(epoch, receipt))
    responded = sharing_family.render_responded(Responded(contract_id, accepted, receipt))
    voted = gov_family.render_voted(Voted(contract_id, contract_id, accepted, 1, epoch, receipt))
    for out in (revoked, responded, voted):
        assert ("receiptId" in out) == (receipt is not None)
    assert revoked["revoked"] is True and responded["accepted"] is accepted


@given(ids, st.sampled_from(["TEMPORARY", "PERMANENT", "SYNDICATE"]), epochs, epochs, ids)
def test_shared_renders_the_type_in_lower_case(contract_id, mode, epoch, expires, rid):
    out = sharing_family.render_shared(Shared(contract_id, mode, 2, epoch, expires, rid))
    assert out["type"] == mode.lower() and out["expiresAt"] == str(expires)


@given(ids, st.one_of(st.none(), st.text(max_size=20)), epochs, ids)
def test_proposed_keeps_the_terms_as_text(pid, value, epoch, holder):
    proposed = Proposed(pid, "emission_param", "k", value, epoch, holder, pid)
    out = gov_family.render_proposed(proposed)
    assert out["proposedValue"] == value and _hex(out["proposerHash"]) == holder


# -- the registry is the one place that names an operation ----------------------------------

_SAIHM = Path(saihm.__file__).parent
_REGISTRY_MODULE = _SAIHM / "events" / "operations.py"
#: String literals equal to an operation name that are not operation names: the signed-note
#: key file header "PRIVATE KEY" (translog, below the events layer) and the MCP check's
#: report heading for the status tool (client side, which reads no registry).
_NOT_OPERATIONS = {
    ("translog/checkpoint.py", "KEY"),
    ("translog/note.py", "KEY"),
    ("translog/witness.py", "KEY"),
    ("mcp/report.py", "STATUS"),
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (or other bare string statements)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _operation_literals() -> set[tuple[str, str, int]]:
    names = {op.value for op in Operation}
    found = set()
    for path in sorted(_SAIHM.rglob("*.py")):
        if path == _REGISTRY_MODULE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in names
                and id(node) not in skip
            ):
                found.add((path.relative_to(_SAIHM).as_posix(), node.value, node.lineno))
    return found


def test_no_raw_operation_name_outside_the_registry() -> None:
    # An operation is dispatched on its Operation member, never on a string spelling of it,
    # so renaming or adding one is an edit of saihm/events/operations.py the type checker
    # follows; comments and docstrings may name operations.
    found = _operation_literals()
    stray = sorted((p, v, n) for p, v, n in found if (p, v) not in _NOT_OPERATIONS)
    assert stray == [], stray
    # The exceptions still exist (a stale exception would hide a new literal in that file).
    assert {(p, v) for p, v, _ in found} >= _NOT_OPERATIONS


# -- the client and the MCP surface are bound to the registry --------------------------------


def _module_tree(module: object) -> ast.Module:
    return ast.parse(Path(str(getattr(module, "__file__", ""))).read_text(encoding="utf-8"))


def _first_string_args(tree: ast.AST, callee: str) -> list[str]:
    """The string first arguments of every call of ``callee`` (a name or an attribute)."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        first = node.args[0]
        if name == callee and isinstance(first, ast.Constant) and isinstance(first.value, str):
            out.append(first.value)
    return out


def test_every_binding_method_has_one_client_call_on_both_clients() -> None:
    # Each method of the binding has one request builder in the sans-I/O core, and both
    # Client and AsyncClient expose it: from the core's table of methods (_core.Methods), or,
    # for the two that learn the caller's holderId, written out on each client. A method
    # added to the registry without its client call (or a client call for a method the
    # binding does not serve) fails here.
    core = _module_tree(client_core)
    builders = {
        fn.name: _first_string_args(fn, "Call")
        for fn in core.body
        if isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_")
    }
    builders = {name: methods for name, methods in builders.items() if methods}
    built = [m for methods in builders.values() for m in methods]
    assert sorted(built) == sorted(METHODS)
    tabled = {
        name: value.build
        for name, value in vars(client_core.Methods).items()
        if isinstance(value, client_core.ClientMethod)
    }
    written = {"recall", "status"}
    assert set(tabled) == set(builders) - written
    assert all(tabled[name] is getattr(client_core, name) for name in tabled)
    for module in (client_sync, client_async):
        used = {
            node.attr
            for node in ast.walk(_module_tree(module))
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "_core"
        }
        assert written <= used, (module.__name__, written - used)
    for kind in (Client, AsyncClient):
        assert issubclass(kind, client_core.Methods)
        assert all(callable(getattr(kind, name, None)) for name in builders), kind


def test_a_tabled_method_is_the_builders_on_both_faces() -> None:
    # One line of _core.Methods gives AsyncClient a coroutine function and Client a blocking
    # one, each with the builder's arguments and docstring and returning what it decodes.
    asyncc = AsyncClient("http://127.0.0.1:9/", "Bearer t")
    sync = Client("http://127.0.0.1:9/", "Bearer t")
    try:
        for name, value in vars(client_core.Methods).items():
            if not isinstance(value, client_core.ClientMethod):
                continue
            on_async, on_sync = getattr(asyncc, name), getattr(sync, name)
            assert inspect.iscoroutinefunction(on_async) and not inspect.iscoroutinefunction(
                on_sync
            )
            built = inspect.signature(value.build)
            for method in (on_async, on_sync):
                shown = inspect.signature(method)
                assert shown.parameters == built.parameters, name
                assert not str(shown.return_annotation).startswith("Call["), name
                assert method.__doc__ == value.build.__doc__ and method.__doc__, name
    finally:
        sync.close()


def test_the_mcp_surface_serves_and_calls_exactly_the_protocol_tools() -> None:
    served = _first_string_args(_module_tree(mcp_server), "tool")
    served += [
        kw.value.value
        for node in ast.walk(_module_tree(mcp_server))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "tool"
        for kw in node.keywords
        if kw.arg == "name" and isinstance(kw.value, ast.Constant)
    ]
    called = _first_string_args(_module_tree(mcp_tools), "call")
    assert sorted(served) == sorted(PROTOCOL_TOOLS)
    assert set(called) == set(PROTOCOL_TOOLS)


# -- docs/internals.md "Adding an operation" is true ------------------------------------------

_REGISTRY_TABLES = {
    "OPERATIONS",
    "BY_NAME",
    "METHODS",
    "PROTOCOL_TOOLS",
    "Effect",
    "OperationSpec",
    "Method",
    "public_log_names",
    "replay_events",
}


def _adding_an_operation() -> str:
    text = (_SAIHM.parent / "docs" / "internals.md").read_text(encoding="utf-8")
    section = text.split("## Adding an operation\n", 1)[1]
    return section.split("\n## ", 1)[0]


def _named_files(section: str) -> set[str]:
    """The file names (``cellcache.py``) of every backticked path in the section."""
    return {token.rsplit("/", 1)[-1] for token in re.findall(r"`([\w./]+\.py)`", section)}


def test_adding_an_operation_names_existing_places() -> None:
    section = _adding_an_operation()
    for token in re.findall(r"`((?:saihm|tests)/[\w./]+)`", section):
        assert (_SAIHM.parent / token).exists(), token


def test_adding_an_operation_names_every_reader_of_the_registry() -> None:
    # A module that derives behaviour from the registry's tables is a place the section must
    # name (as one to edit or one that needs no edit); so is one that spells a binding method
    # (the benchmarks only call existing methods).
    named = _named_files(_adding_an_operation())
    readers = set()
    for path in sorted(_SAIHM.rglob("*.py")):
        if path == _REGISTRY_MODULE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in (
                "saihm.events",
                "saihm.events.operations",
            ):
                if {a.name for a in node.names} & _REGISTRY_TABLES:
                    readers.add(path)
            elif (
                isinstance(node, ast.Constant)
                and node.value in METHODS
                and id(node) not in skip
                and "bench" not in path.parts
            ):
                readers.add(path)
    assert readers, "no reader found: the scan is broken"
    missing = sorted(p.relative_to(_SAIHM).as_posix() for p in readers if p.name not in named)
    assert missing == [], missing


def test_the_explorers_operation_list_is_the_registrys_served_in_the_page() -> None:
    # The explorer's script reads its operations from the page the server renders (and the
    # static copy carries), so a new operation needs no edit of the JavaScript.
    from saihm.http.explorer import render_index, static_files

    script = (_SAIHM / "http" / "explorer" / "static" / "explorer.js").read_text(encoding="utf-8")
    names = {op.value for op in Operation}
    hand_lists = [
        found
        for found in re.findall(r"\[[^\]]*\]", script)
        if len(names & set(re.findall(r'"(\w+)"', found))) > 2
    ]
    assert hand_lists == []
    for page in (render_index(None), static_files()["index.html"].decode("utf-8")):
        menu = re.search(r'<select id="list-operation"[^>]*>(.*?)</select>', page, re.S)
        assert menu is not None
        listed = re.findall(r"<option>(\w+)</option>", menu.group(1))
        assert listed == [op.value for op in Operation if op.value in public_log_names()]
