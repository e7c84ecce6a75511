"""The person's own actions call the operations directly with an Access: no token is minted
and none is authenticated (issue 12 Build 4), and a held proposal is accepted through the same
operation path as any remember (MemoryTools.remember_sealed)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from saihm.authority import Authority
from saihm.errors import NotFound, NotPermitted, Unauthenticated
from saihm.events import Operation, Receipt
from saihm.operator import MemoryTools
from saihm.provider.models import MemoryQuery, MemoryStore
from saihm.store import Store


def _no_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a person's action minted or authenticated a token")

    monkeypatch.setattr(Authority, "issue", refuse)
    monkeypatch.setattr(Store, "authenticate", refuse)


def test_store_and_forget_mint_no_token(world, monkeypatch) -> None:
    reader = world.consumer("reader", ["notes"])
    _no_tokens(monkeypatch)
    leaves = world.store.size()
    ref = world.vault.store(MemoryStore(namespace="notes", content={"fact": "tea"}))
    assert world.store.size() == leaves + 1  # the REMEMBER receipt only
    ((_, leaf),) = world.store.receipts("subjectId", bytes.fromhex(ref.id))[0]
    receipt = Receipt.from_cbor(leaf)
    assert receipt.operation == Operation.REMEMBER and receipt.receipt_id.hex() == ref.receipt_id
    done = world.vault.forget(ref.id)
    assert done["erased"] is True and done["receiptId"] is not None
    assert world.vault.forget(ref.id) == {"id": ref.id, "erased": False, "receiptId": None}
    monkeypatch.undo()
    assert reader.query(MemoryQuery(consumer="reader")).records == ()


def test_accept_mints_no_token_and_goes_through_remember_sealed(world, monkeypatch) -> None:
    agent = world.consumer("agent", ["notes"], "readwrite")
    ref = agent.store(MemoryStore(consumer="agent", namespace="notes", content={"fact": "x"}))
    calls: list[bytes] = []
    real = MemoryTools.remember_sealed

    def spy(self, access, cell, session_id, guard=None):
        calls.append(cell.cell_id)
        return real(self, access, cell, session_id, guard)

    _no_tokens(monkeypatch)
    monkeypatch.setattr(MemoryTools, "remember_sealed", spy)
    stored = world.vault.accept(ref.id)
    assert calls == [bytes.fromhex(stored.id)]
    remembers, _ = world.store.receipts("operation", Operation.REMEMBER.value.encode())
    assert [Receipt.from_cbor(leaf).subject_id for _, leaf in remembers] == [
        bytes.fromhex(stored.id)
    ]
    assert world.vault.pending() == []


def test_remember_sealed_refuses_another_holders_cell(world) -> None:
    agent = world.consumer("agent", ["notes"], "readwrite")
    agent.store(MemoryStore(consumer="agent", namespace="notes", content={"fact": "x"}))
    ((_, cell, _),) = world.store.held.items()
    other = world.operator.admin.create_holder()
    access = world.store.person_access(other, b"\x01" * 32)
    with pytest.raises(NotPermitted):
        world.operator.memory.remember_sealed(access, cell, b"\x01" * 32)
    assert world.vault.pending() != []  # nothing taken


def test_person_access_is_session_scoped_and_honours_revocation(world) -> None:
    holder = world.vault.meta.holder_id
    access = world.store.person_access(holder, world.vault.meta.session_id)
    assert not access.all_sessions and access.namespaces is None and access.consumer is None
    other_session = b"\x02" * 32
    elsewhere = world.store.person_access(holder, other_session)
    world.operator.memory.remember(elsewhere, "in another session")
    assert [c.payload.content for c in world.store.read(access)] == []
    world.operator.admin.revoke_session(holder, other_session)
    with pytest.raises(Unauthenticated):
        world.store.person_access(holder, other_session)
    with pytest.raises(Unauthenticated):
        world.store.person_access(b"\x03" * 32, other_session)  # no KEY receipt


def test_accept_of_an_unknown_proposal_changes_nothing(world) -> None:
    leaves = world.store.size()
    with pytest.raises(NotFound):
        world.vault.accept("ab" * 32)
    assert world.store.size() == leaves


_CHILD = textwrap.dedent(
    """
    import json, sys
    from saihm.config import Config
    from saihm.errors import NotFound
    from saihm.operator import MemoryTools, Operator
    from saihm.provider.vault import LocalVault
    from saihm.store import Store

    tmp, proposal = sys.argv[1:3]
    config = Config.for_data(tmp + "/data", tmp + "/kek", tmp + "/authority")
    store = Store(config)
    try:
        vault = LocalVault.open(Operator(store, config))
        sys.stdin.readline()  # start together
        try:
            print(json.dumps({"stored": vault.accept(proposal).id}))
        except NotFound:
            print(json.dumps({"stored": None}))
    finally:
        store.close()
    """
)


def test_two_processes_accepting_one_proposal_store_it_once(tmp_path: Path) -> None:
    from tests.provider.conftest import make_vault

    world, store = make_vault(tmp_path)
    agent = world.consumer("agent", ["notes"], "readwrite")
    ref = agent.store(MemoryStore(consumer="agent", namespace="notes", content={"fact": "x"}))
    store.close()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path), ref.id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    results = [json.loads(child.communicate(timeout=120)[0]) for child in children]
    assert all(child.returncode == 0 for child in children)
    stored = [r["stored"] for r in results if r["stored"] is not None]
    assert len(stored) == 1
    again = Store(world.config)
    try:
        remembers, _ = again.receipts("operation", Operation.REMEMBER.value.encode())
        assert len(remembers) == 1
        assert again.held.items() == []
    finally:
        again.close()
