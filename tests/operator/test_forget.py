"""saihm_forget when another writer erases the same cell mid-call (saihm-protocol
"saihm_forget": an already-erased cell is AlreadyErased, never a refusal).

The race CI hit through the LangGraph adapter: two writers superseding one key both forget the
old cell; the second one's scope read ran after the first one's erasure and found nothing, and
the operator answered "not_holder" (HTTP 403) for a cell the caller holds. The interleaving is
driven here step by step; tests/integrations/test_langgraph_store.py races two processes.
"""

from __future__ import annotations

import pytest

from saihm.errors import NotPermitted
from saihm.operator import AlreadyErased, Forgotten
from tests.support.world import World


def test_a_cell_erased_between_the_checks_is_already_erased(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    op, store = world.operator, world.store
    holder = world.holder()
    access = store.authenticate(holder.token)
    cell = op.memory.remember(access, "superseded value")
    read = store.read
    raced: list[object] = []

    def read_after_the_other_writer(*args: object, **kwargs: object) -> object:
        if not raced:
            monkeypatch.setattr(store, "read", read)
            raced.append(op.memory.forget(access, cell.cell_id))
        return read(*args, **kwargs)

    monkeypatch.setattr(store, "read", read_after_the_other_writer)
    assert isinstance(op.memory.forget(access, cell.cell_id), AlreadyErased)
    assert len(raced) == 1 and isinstance(raced[0], Forgotten)


def test_a_cell_outside_the_scope_is_still_refused(world: World) -> None:
    """The second look decides only for an erased cell: one the token's scope leaves out is
    refused as before."""
    op, store = world.operator, world.store
    holder = world.holder()
    cell = op.memory.remember(store.authenticate(holder.token), "in notes", namespace="notes")
    narrow = store.authenticate(world.grant_token(holder.holder_id, ["memory"]))
    with pytest.raises(NotPermitted):
        op.memory.forget(narrow, cell.cell_id)
    with store.read_txn() as txn:
        assert not store.projections.cells.is_erased(txn, cell.cell_id)
