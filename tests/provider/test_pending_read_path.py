"""Pending proposals are opened through the store's checked read path, with an Access.

Issue 12 ("one CheckedReader that is the only code producing plaintext (pending proposals go
through it with an access, too)"): the provider's held proposals (saihm/store/held.py) are
decrypted only by :meth:`saihm.store.read.reader.CheckedReader.open_prepared`, which refuses an
Access the store did not issue and returns nothing out of the Access's scope. The static half
(no other module decrypts) is tests/store/test_single_read_path.py.
"""

from __future__ import annotations

import dataclasses

import pytest

import saihm.store.read.reader as reader_module
from saihm.errors import NotFound, Unauthenticated
from saihm.provider.models import MemoryStore
from saihm.store import Access
from saihm.store.read.reader import CheckedReader
from tests.support.world import hand_made_access


def _propose(world, content: object = None) -> str:
    agent = world.consumer("agent", ["notes"], "readwrite")
    request = MemoryStore(consumer="agent", namespace="notes", content=content or {"fact": "x"})
    return agent.store(request).id


def test_listing_and_accepting_open_the_proposal_through_the_checked_reader(
    world, monkeypatch
) -> None:
    ref = _propose(world, {"fact": "through the reader"})
    opened: list[Access] = []
    decrypted: list[bytes] = []
    real_open, real_decrypt = CheckedReader.open_prepared, reader_module.decrypt

    def open_prepared(self, txn, access, cell):  # type: ignore[no-untyped-def]
        opened.append(access)
        return real_open(self, txn, access, cell)

    def decrypt(cell, dek):  # type: ignore[no-untyped-def]
        decrypted.append(cell.cell_id)
        return real_decrypt(cell, dek)

    monkeypatch.setattr(CheckedReader, "open_prepared", open_prepared)
    monkeypatch.setattr(reader_module, "decrypt", decrypt)
    (held,) = world.vault.pending()
    assert held.record == {"content": {"fact": "through the reader"}}
    assert len(opened) == 1 and len(decrypted) == 1
    meta = world.vault.meta
    assert (opened[0].holder_id, opened[0].session_id) == (meta.holder_id, meta.session_id)
    assert world.vault.accept(ref).state == "stored"
    assert len(opened) == 2 and len(decrypted) == 2


def test_a_hand_made_or_widened_access_opens_no_proposal(world) -> None:
    ref = bytes.fromhex(_propose(world))
    held = world.store.held
    meta = world.vault.meta
    person = world.store.person_access(meta.holder_id, meta.session_id)
    assert held.open(person, ref)[2].namespace == "notes"  # control: the issued one opens it
    hand_made = hand_made_access(meta.holder_id, meta.session_id)
    with pytest.raises(Unauthenticated):
        held.open(hand_made, ref)
    with pytest.raises(Unauthenticated):
        held.open(dataclasses.replace(person, all_sessions=True), ref)


def test_another_holders_access_opens_no_proposal(world) -> None:
    """An issued Access of another holder (or another session of the same holder) gets
    ``proposal_not_found``, as for a proposal never held: nothing of the content leaves."""
    ref = bytes.fromhex(_propose(world))
    held = world.store.held
    other = world.operator.admin.create_holder()
    stranger = world.store.person_access(other, bytes(32))
    with pytest.raises(NotFound) as refused:
        held.open(stranger, ref)
    assert refused.value.code == "proposal_not_found"
    meta = world.vault.meta
    other_session = world.store.person_access(meta.holder_id, b"\x01" * 32)
    with pytest.raises(NotFound):
        held.open(other_session, ref)
    assert len(held.items()) == 1  # refusing changed nothing
