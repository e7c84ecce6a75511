"""The edge's recall rendering cache (saihm.protocol.RecallItems): a recall element is rendered
once per verified cell, kept by cell id at the edge, served again only for the very cell the
store's read path returned to this caller, and gone with that cell (erasure, the store's cache
dropping it) and within its bound."""

from __future__ import annotations

import gc
import secrets
import weakref
from pathlib import Path

import pytest

from saihm.events import SealedPayload
from saihm.protocol import RecallItem, RecallItems, recall_items
from saihm.store.read.cache import Generation
from saihm.store.read.views import CellHeader, OpenedCell, Page
from tests.support.world import World, make_world


def _opened(cell_id: bytes, content: str = "tea") -> OpenedCell:
    header = CellHeader(cell_id, bytes(32), 1, "T1", bytes(32), bytes(16), 1_800_000_000)
    payload = SealedPayload(
        content=content, session_id=bytes(32), namespace="memory", kind="memory"
    )
    return OpenedCell(cell=header, payload=payload, shared=False, index=0)


def test_a_verified_cell_is_rendered_once_and_its_element_is_read_only(world: World) -> None:
    alice = world.holder()
    world.call(alice, "saihm_remember", content="tea, no sugar")
    first = world.call(alice, "saihm_recall")
    second = world.call(alice, "saihm_recall")
    assert isinstance(first, list) and isinstance(second, list)
    assert first[0] is second[0] and isinstance(first[0], RecallItem)
    assert bytes.fromhex(first[0]["cellId"]) in recall_items(world.operator)
    with pytest.raises(TypeError):
        first[0]["plaintext"] = "coffee"
    assert dict(first[0])["plaintext"] == "tea, no sugar"


def test_a_caller_who_may_not_see_a_cell_is_never_served_its_rendering(world: World) -> None:
    alice, bob = world.holder(), world.holder()
    cell = world.call(alice, "saihm_remember", content="alice's secret")
    assert world.call(alice, "saihm_recall") != []
    assert bytes.fromhex(cell["cellId"]) in recall_items(world.operator)  # type: ignore[index]
    assert world.call(bob, "saihm_recall") == []
    assert world.call(bob, "saihm_recall", query="secret") == []


def test_an_erased_cells_rendering_goes_with_it(world: World) -> None:
    alice = world.holder()
    one = world.call(alice, "saihm_remember", content="tea")["cellId"]  # type: ignore[index]
    two = world.call(alice, "saihm_remember", content="coffee")["cellId"]  # type: ignore[index]
    world.call(alice, "saihm_recall")
    items = recall_items(world.operator)
    assert bytes.fromhex(one) in items and bytes.fromhex(two) in items
    world.call(alice, "saihm_forget", id=one)
    assert bytes.fromhex(one) not in items
    world.call(alice, "saihm_forget_session", sessionId=alice.session_id.hex())
    assert bytes.fromhex(two) not in items
    assert world.call(alice, "saihm_recall") == []


def test_without_the_store_cache_no_rendering_outlives_the_call(tmp_path: Path) -> None:
    world = make_world(tmp_path, recall_cache_mb=0)
    try:
        alice = world.holder()
        world.call(alice, "saihm_remember", content="tea")
        assert len(world.call(alice, "saihm_recall")) == 1  # type: ignore[arg-type]
        gc.collect()
        assert len(recall_items(world.operator)) == 0
    finally:
        world.operator.store.close()


def test_a_rendering_is_dropped_when_its_verified_cell_is() -> None:
    items = RecallItems()
    cell_id = secrets.token_bytes(32)
    opened = _opened(cell_id)
    items.item(opened)
    assert cell_id in items
    del opened
    gc.collect()
    assert cell_id not in items


def test_a_rendering_is_served_only_for_the_cell_it_was_rendered_from() -> None:
    items = RecallItems()
    cell_id = secrets.token_bytes(32)
    old, new = _opened(cell_id, "tea"), _opened(cell_id, "coffee")
    assert items.item(old)["plaintext"] == "tea"
    assert items.item(new)["plaintext"] == "coffee"
    assert items.item(new) is items.item(new)


def test_the_shared_view_of_a_cell_reuses_its_rendering() -> None:
    items = RecallItems()
    own = _opened(secrets.token_bytes(32))
    shared = OpenedCell(cell=own.cell, payload=own.payload, shared=True, index=own.index)
    assert items.item(shared) is items.item(own)


def test_the_cache_keeps_at_most_its_bound_oldest_first_out() -> None:
    items = RecallItems(bound=2)
    cells = [_opened(secrets.token_bytes(32)) for _ in range(3)]
    for opened in cells:
        items.item(opened)
    assert len(items) == 2
    assert cells[0].cell.cell_id not in items
    assert all(o.cell.cell_id in items for o in cells[1:])


def test_rendering_many_at_once_is_rendering_each_in_turn() -> None:
    """``items`` (one loop over a whole answer) serves exactly what ``item`` would, in order:
    a kept element for the very cell it was rendered from or its shared view, a fresh one
    for another cell under the same id, and each new one kept."""
    ids = [secrets.token_bytes(32) for _ in range(4)]
    cells = [_opened(cell_id, f"note {n}") for n, cell_id in enumerate(ids)]
    one, many = RecallItems(), RecallItems()
    for cell in cells[:2]:
        one.item(cell)
        many.item(cell)
    kept = many.item(cells[1])
    replaced = _opened(ids[0], "another cell, same id")
    shared = OpenedCell(cell=cells[1].cell, payload=cells[1].payload, shared=True, index=0)
    batch = [replaced, shared, cells[2], cells[3], cells[2]]
    got = many.items(batch)
    assert [dict(x) for x in got] == [dict(one.item(c)) for c in batch]
    assert got[0]["plaintext"] == "another cell, same id"
    assert got[1] is kept and got[2] is got[4] is many.item(cells[2])
    assert all(cell_id in many for cell_id in ids)


def test_a_whole_holder_answer_is_kept_only_while_its_list_is_unchanged(world: World) -> None:
    """A holder-wide answer of every cell is rendered once per generation of the holder's kept
    visible list: served again while the list is unchanged, never after a cell joins or
    leaves it, and an erased cell's element is not held by the kept answer."""
    alice = world.holder()
    wide = world.grant_token(alice.holder_id)
    ids = [
        world.call(alice, "saihm_remember", content=f"note {n}")["cellId"]  # type: ignore[index]
        for n in range(3)
    ]
    first = world.call(wide, "saihm_recall")
    second = world.call(wide, "saihm_recall")
    assert isinstance(first, list) and isinstance(second, list)
    assert first == second and [x["cellId"] for x in first] == ids
    assert all(a is b for a, b in zip(first, second, strict=True))
    gone = weakref.ref(first[0])
    del first, second
    world.call(alice, "saihm_forget", id=ids[0])
    added = world.call(alice, "saihm_remember", content="note 3")["cellId"]  # type: ignore[index]
    after = world.call(wide, "saihm_recall")
    assert [x["cellId"] for x in after] == [*ids[1:], added]  # type: ignore[index,union-attr]
    gc.collect()
    assert gone() is None  # the erased cell's element went with its generation


def test_a_whole_answer_is_rendered_afresh_for_another_generation() -> None:
    """``page_items`` serves a kept whole answer only for the generation it was rendered for,
    and lets it go with that generation."""
    items = RecallItems()
    cells = [_opened(secrets.token_bytes(32), f"note {n}") for n in range(3)]
    generation = Generation()
    kept = items.page_items(Page(cells, False, generation=generation))
    assert items.page_items(Page(list(cells), False, generation=generation)) is kept
    other = [_opened(c.cell.cell_id, "changed") for c in cells]
    fresh = items.page_items(Page(other, False, generation=Generation()))
    assert [x["plaintext"] for x in fresh] == ["changed"] * 3
    assert [x["plaintext"] for x in items.page_items(Page(cells, False))] == [
        f"note {n}" for n in range(3)
    ]
    held = weakref.ref(kept[0])
    del kept, generation, cells
    gc.collect()
    assert held() is None
