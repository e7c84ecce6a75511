"""Write proposals: held sealed, never live until the person accepts (RFC 0007 Phase C)."""

from __future__ import annotations

import pytest

from saihm.errors import NotFound, NotPermitted
from saihm.events import Operation
from saihm.provider.models import MemoryQuery, MemoryStore
from tests.support.postgres import store_driver, store_url_for


def _propose(provider, consumer="agent", namespace="notes", content=None):
    return provider.store(
        MemoryStore(consumer=consumer, namespace=namespace, content=content or {"fact": "x"})
    )


def test_proposal_is_pending_and_invisible_until_accepted(world):
    agent = world.consumer("agent", ["notes"], "readwrite")
    leaves = world.store.size()
    ref = _propose(agent, content={"fact": "likes tea"})
    assert ref.state == "pending"
    assert world.store.size() == leaves + 0  # no receipt, nothing live
    # the query itself adds a RECALL receipt, but no record
    assert agent.query(MemoryQuery(consumer="agent")).records == ()
    (held,) = world.vault.pending()
    assert held.id == ref.id and held.consumer == "agent" and held.namespace == "notes"
    assert held.record == {"content": {"fact": "likes tea"}}
    stored = world.vault.accept(ref.id)
    assert stored.state == "stored"
    (record,) = agent.query(MemoryQuery(consumer="agent")).records
    assert record.id == stored.id and record.content == {"fact": "likes tea"}
    rows, _ = world.store.receipts("subjectId", bytes.fromhex(stored.id))
    assert len(rows) == 1  # the REMEMBER receipt
    assert world.vault.pending() == []
    with pytest.raises(NotFound):
        world.vault.accept(ref.id)


def test_a_proposal_keeps_one_id_from_propose_to_accept_and_forget(world):
    """Issue 25 item 6: the consumer's proposal id is the accepted record's id, so forget by
    the id the consumer holds erases the record."""
    agent = world.consumer("agent", ["notes"], "readwrite")
    ref = _propose(agent, content={"fact": "likes tea"})
    stored = world.vault.accept(ref.id)
    assert stored.id == ref.id
    (record,) = agent.query(MemoryQuery(consumer="agent")).records
    assert record.id == ref.id
    assert world.vault.forget(ref.id)["erased"] is True
    assert agent.query(MemoryQuery(consumer="agent")).records == ()


def test_rejected_proposal_never_lands_and_its_key_is_destroyed(world):
    agent = world.consumer("agent", ["notes"], "readwrite")
    ref = _propose(agent)
    ((_, cell, _),) = world.store.held.items()
    assert world.vault.reject(ref.id) is True
    assert world.vault.reject(ref.id) is False
    assert world.vault.pending() == []
    with world.store.read_txn() as txn:
        assert not world.store.keyring.has_dek(txn, cell.cell_id)
    assert agent.query(MemoryQuery(consumer="agent")).records == ()
    remembers, _ = world.store.receipts("operation", Operation.REMEMBER.value.encode())
    assert remembers == []


def test_pending_is_sealed_at_rest(world):
    agent = world.consumer("agent", ["notes"], "write")
    marker = "PLAINTEXT-MARKER-7f3a"
    _propose(agent, content={"fact": marker})
    for stored in _bytes_at_rest(world):
        assert marker.encode() not in stored
    assert marker not in world.vault.meta.path(world.config.data_dir).read_text()


def _bytes_at_rest(world) -> list[bytes]:
    """What the store keeps: the LMDB files, or every row of the PostgreSQL tables."""
    if store_driver() == "lmdb":
        world.store.storage.env.sync(True)
        return [path.read_bytes() for path in world.config.lmdb_dir.iterdir()]
    import psycopg

    with psycopg.connect(store_url_for(world.config.data_dir)) as conn:
        rows = conn.execute("SELECT k, v FROM saihm_kv").fetchall()
        rows += conn.execute(
            "SELECT convert_to(key || value, 'UTF8'), ''::bytea FROM saihm_meta"
        ).fetchall()
    assert rows
    return [bytes(part) for row in rows for part in row]


def test_write_outside_grant_is_refused(world):
    agent = world.consumer("agent", ["notes"], "write")
    with pytest.raises(NotPermitted):
        _propose(agent, namespace="health")
    assert world.vault.pending() == []


def test_revocation_rejects_pending_and_stops_writes(world):
    agent = world.consumer("agent", ["notes"], "write")
    _propose(agent)
    assert world.vault.revoke("agent")["rejected"] == 1
    assert world.vault.pending() == []
    with pytest.raises(Exception) as err:
        _propose(agent)
    assert getattr(err.value, "status", None) == 401


def test_kek_rotation_keeps_pending_proposals_readable(world):
    agent = world.consumer("agent", ["notes"], "write")
    ref = _propose(agent, content={"fact": "survives rotation"})
    world.store.keyring.rotate()
    stored = world.vault.accept(ref.id)
    reader = world.consumer("reader", ["notes"])
    (record,) = reader.query(MemoryQuery(consumer="reader")).records
    assert record.id == stored.id and record.content == {"fact": "survives rotation"}
