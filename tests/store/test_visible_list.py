"""The kept visible list of the recall cache (saihm/store/read/cache.py ``VisibleList``, issue 24).

Each holder's index keeps its indexed (unerased, verified) cells in log order, maintained by
the log replay and the bound; a holder-wide read walks it instead of re-filtering the whole
cache, and still checks every item against its caller (saihm/store/read/holderwide.py
``allowed_own``, the ``still_allowed`` rule). The recall cache is named in the standards as
needing property tests: after any sequence of remember / forget / share / revoke / rotation
/ reads, the kept list is the list computed the old way (the holder's listed cells that are
cached, in log order, each the cache's own verified cell) and every holder-wide answer is
the model's.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from saihm.store.auth import Access
from saihm.store.read.cache import CacheEntry, VisibleList
from saihm.store.read.holderwide import allowed_own, still_allowed
from saihm.store.read.views import OpenedCell
from tests.store.test_recall_cache import ids, in_child
from tests.support.world import Holder, World, make_world

LONG = os.environ.get("SAIHM_LONG") == "1"
WORDS = ("apple", "river", "stone")

pick = st.integers(min_value=0, max_value=10_000)


def old_way(world: World, holder_id: bytes) -> list[OpenedCell] | None:
    """The holder's kept list as a read computed it before issue 24: every listed cell that
    is cached, in the list's (log) order; None when the cache lists none for the holder."""
    cache = world.store.reader.cache
    index = cache.holder_index(holder_id)
    if index is None or index.cells is None:
        return None
    return [cache.entries[k].own for k in index.cells if k in index.items]


class VisibleListMachine(RuleBasedStateMachine):
    """Two holders (a writes and shares, b is shared with), a cache that follows the log."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory(prefix="saihm-visible-")
        self.world = make_world(Path(self.tmp.name))
        self.a, self.b = self.world.holder(), self.world.holder()
        self.wide = {
            h.holder_id: self.world.grant_token(h.holder_id, None) for h in (self.a, self.b)
        }
        #: Every cell written (hex cellId, its owner), in log order; the erased ones.
        self.written: list[tuple[str, bytes]] = []
        self.erased: set[str] = set()
        #: Active accepted contracts: contractId -> the cell it covers (a's, read by b).
        self.contracts: dict[str, str] = {}
        #: a's cells written in its first session (the ones its session token may share).
        self.shareable: list[str] = []

    def teardown(self) -> None:
        self.world.operator.store.close()
        self.tmp.cleanup()

    def live(self, owner: bytes) -> list[str]:
        return [c for c, o in self.written if o == owner and c not in self.erased]

    def expected(self, holder_id: bytes) -> list[str]:
        """What a holder-wide "all cells" recall returns: own live cells and a's cells
        covered by an active contract for b, in log order."""
        shared = set(self.contracts.values()) if holder_id == self.b.holder_id else set()
        return [
            c for c, o in self.written if c not in self.erased and (o == holder_id or c in shared)
        ]

    @rule(who=st.sampled_from("ab"), word=st.sampled_from(WORDS), new_session=st.booleans())
    def remember(self, who: str, word: str, new_session: bool) -> None:
        h = self.a if who == "a" else self.b
        token = self.world.session(h.holder_id)[1] if new_session else h.token
        got = self.world.call(token, "saihm_remember", content=f"{word} {len(self.written)}")
        self.written.append((got["cellId"], h.holder_id))  # type: ignore[index]
        if h is self.a and not new_session:
            self.shareable.append(got["cellId"])  # type: ignore[index]

    @precondition(lambda self: any(c not in self.erased for c, _o in self.written))
    @rule(n=pick)
    def forget(self, n: int) -> None:
        live = [(c, o) for c, o in self.written if c not in self.erased]
        cid, owner = live[n % len(live)]
        token = self.world.grant_token(owner, None)
        assert self.world.call(token, "saihm_forget", id=cid)["success"] is True  # type: ignore[index]
        self.erased.add(cid)
        self.contracts = {k: c for k, c in self.contracts.items() if c != cid}

    @precondition(lambda self: any(c not in self.erased for c in self.shareable))
    @rule(n=pick)
    def share(self, n: int) -> None:
        live = [c for c in self.shareable if c not in self.erased]
        cid = live[n % len(live)]
        self.contracts[self.world.share_accepted(self.a, self.b, [cid])] = cid

    @precondition(lambda self: bool(self.contracts))
    @rule(n=pick)
    def revoke(self, n: int) -> None:
        contract = sorted(self.contracts)[n % len(self.contracts)]
        self.world.call(self.a, "saihm_revoke_share", contractId=contract)
        del self.contracts[contract]

    @rule()
    def rotate(self) -> None:
        self.world.store.rotate_kek()

    @rule(who=st.sampled_from("ab"))
    def session_read(self, who: str) -> None:
        """A session-scoped read caches cells without listing the holder's."""
        h = self.a if who == "a" else self.b
        self.world.call(h, "saihm_recall")

    @rule(who=st.sampled_from("ab"), shape=st.sampled_from(["all", "limit", "query"]))
    def holder_wide_read(self, who: str, shape: str) -> None:
        h = self.a if who == "a" else self.b
        token, want = self.wide[h.holder_id], self.expected(h.holder_id)
        if shape == "all":
            assert ids(self.world, token) == want
        elif shape == "limit":
            assert ids(self.world, token, limit=2) == want[:2]
        else:
            got = ids(self.world, token, query="apple river stone", limit=50)
            assert sorted(got) == sorted(want)

    @invariant()
    def kept_list_is_the_old_way(self) -> None:
        cache = self.world.store.reader.cache
        for h in (self.a, self.b):
            index = cache.holder_index(h.holder_id)
            if index is None:
                continue
            kept = index.visible
            assert kept.orders == sorted(kept.orders)
            assert len(kept.ids) == len(kept.owners) == len(kept.opened) == len(kept.orders)
            assert set(kept.ids) == set(index.items)
            for k, owner, opened in zip(kept.ids, kept.owners, kept.opened, strict=True):
                assert opened is cache.entries[k].own
                # The verified cell's own fields, not copies that could drift from it.
                assert owner is opened.cell.holder_id and k is opened.cell.cell_id
            old = old_way(self.world, h.holder_id)
            if old is not None:
                assert [id(o) for o in kept.opened] == [id(o) for o in old]
                assert {o.cell.cell_id.hex() for o in kept.opened} <= set(self.live(h.holder_id))


VisibleListMachine.TestCase.settings = settings(
    max_examples=100 if LONG else 12,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestVisibleList = VisibleListMachine.TestCase


# -- allowed_own is the still_allowed rule ---------------------------------------------------


def _kept_of(world: World) -> tuple[VisibleList, list[CacheEntry]]:
    """The kept list of the world's first holder, after a holder-wide read."""
    cache = world.store.reader.cache
    holder = world.holders[0]
    index = cache.holder_index(holder.holder_id)
    assert index is not None
    return index.visible, [cache.entries[k] for k in index.visible.ids]


def test_allowed_own_lets_through_exactly_what_still_allowed_does(tmp_path: Path) -> None:
    """For every access shape (holder-wide, session, namespace-scoped, another holder's) and
    any erased subset, ``allowed_own`` keeps exactly the items ``still_allowed`` allows, in
    order (the fast pass and the item-by-item pass are one rule)."""
    world = make_world(tmp_path)
    try:
        a, b = world.holder(), world.holder()
        _s2, t2 = world.session(a.holder_id)
        for n, (token, ns) in enumerate([(a.token, "memory"), (t2, "work"), (a.token, "work")]):
            world.call(token, "saihm_remember", content=f"note {n}", namespace=ns)
        wide = world.grant_token(a.holder_id)
        ids(world, wide)
        kept, entries = _kept_of(world)
        auth = world.store.reader.authenticator
        accesses = [
            world.store.authenticate(t)
            for t in (wide, a.token, t2, world.grant_token(a.holder_id, ["work"]), b.token)
        ]
        accesses.append(world.store.authenticate(world.grant_token(b.holder_id)))
        assert all(isinstance(x, Access) for x in accesses)

        @settings(max_examples=60, deadline=None)
        @given(erased_bits=st.lists(st.booleans(), min_size=3, max_size=3))
        def check(erased_bits: list[bool]) -> None:
            erased = {k for k, bit in zip(kept.ids, erased_bits, strict=True) if bit}
            for access in accesses:
                auth.require(access)
                want = [e.own for e in entries if still_allowed(e, erased, access, None)]
                assert allowed_own(kept, erased, access) == want

        check()
    finally:
        world.operator.store.close()


def _kept(world: World, word: str, count: int) -> tuple[Holder, str, list[str]]:
    """A holder with ``count`` cells ("WORD n"), a holder-wide token of it, and the cells'
    ids, after one holder-wide read has put them all in the kept list, in log order."""
    holder = world.holder()
    wide = world.grant_token(holder.holder_id)
    cells = [
        world.call(holder, "saihm_remember", content=f"{word} {n}")["cellId"] for n in range(count)
    ]
    assert ids(world, wide) == cells
    return holder, wide, cells


def test_a_forget_elsewhere_leaves_this_process_kept_list(tmp_path: Path) -> None:
    """Two processes: a forget by another process is honoured by this process's next
    holder-wide read, through the kept list (every read shape), and the list drops it."""
    world = make_world(tmp_path)
    try:
        a, wide, cells = _kept(world, "river", 4)
        kept = world.store.reader.cache.holder_index(a.holder_id).visible
        assert [k.hex() for k in kept.ids] == cells
        gone = cells[1]
        assert in_child(world, a.token, "saihm_forget", {"id": gone})["success"] is True
        rest = [c for c in cells if c != gone]
        assert ids(world, wide) == rest
        assert bytes.fromhex(gone) not in kept.ids
        assert ids(world, wide, limit=2) == rest[:2]
        assert gone not in ids(world, wide, query="river")
        # A second holder-wide token (another Access object) sees the same.
        assert ids(world, world.grant_token(a.holder_id)) == rest
    finally:
        world.operator.store.close()


def test_a_cell_erased_but_still_kept_is_not_served(tmp_path: Path) -> None:
    """The kept list is never trusted for erasure: a cell the erasure list names is not
    served even while the list still holds it (e.g. a replay that has not reached it)."""
    world = make_world(tmp_path)
    try:
        a, wide, cells = _kept(world, "stone", 3)
        cache = world.store.reader.cache
        erased = cache._erased_set  # the mirror the replay keeps
        with world.store.read_txn() as txn:
            mirror = erased(txn)
        mirror.add(bytes.fromhex(cells[0]))  # erased, as far as this read knows, but kept
        assert bytes.fromhex(cells[0]) in cache.holder_index(a.holder_id).visible.ids
        assert ids(world, wide) == cells[1:]
        assert ids(world, wide, limit=5) == cells[1:]
    finally:
        world.operator.store.close()


def test_a_replaced_entry_takes_its_place_in_the_kept_list(tmp_path: Path) -> None:
    """A cell cached again (a new verified entry) replaces the old one in place."""
    world = make_world(tmp_path)
    try:
        a = world.holder()
        wide = world.grant_token(a.holder_id)
        cells = [world.call(a, "saihm_remember", content=f"apple {n}")["cellId"] for n in range(3)]
        assert ids(world, wide) == cells
        cache = world.store.reader.cache
        kept = cache.holder_index(a.holder_id).visible
        old = kept.opened[1]
        with cache.lock:
            cache._put(replace(old))
        assert kept.opened[1] is not old and kept.opened[1] == old
        assert [k.hex() for k in kept.ids] == cells
        assert ids(world, wide) == cells
    finally:
        world.operator.store.close()


# -- the list itself, against a model ------------------------------------------------------


def _cell(n: int) -> OpenedCell:
    """A stand-in opened cell: only its header's cellId and owner are read by the list."""
    header = SimpleNamespace(cell_id=n.to_bytes(32, "big"), holder_id=b"h" * 32)
    return cast(OpenedCell, SimpleNamespace(cell=header, index=n))


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["insert", "remove", "replace"]), st.integers(0, 40), pick),
        max_size=60,
    ),
    erased=st.sets(st.integers(0, 60), max_size=80),
)
def test_the_kept_list_is_in_log_order_whatever_order_cells_come_in(steps, erased) -> None:
    """Cells kept in any order (a cold read opens missing cells in set order), removed and
    replaced: the lists read back sorted by leaf index (cellId apart for equal ones, in the
    order they came), parallel, and holding exactly the model's cells; every change gives
    the list a new generation, and ``holds_any`` answers as a pass over the cellIds does."""
    kept = VisibleList()
    model: dict[int, tuple[int, int, OpenedCell]] = {}  # cell -> (order, arrival, opened)
    generations = [kept.generation]
    for arrival, (op, n, order_pick) in enumerate(steps):
        changes = (op == "insert") != (n in model)
        if op == "insert" and n not in model:
            order = order_pick % 20  # equal leaf indexes happen (hints)
            model[n] = (order, arrival, _cell(n))
            kept.insert(order, model[n][2])
        elif op == "remove" and n in model:
            kept.remove(_cell(n).cell.cell_id, model.pop(n)[0])
        elif op == "replace" and n in model:
            order, _came, _old = model[n]
            model[n] = (order, arrival, _cell(n))  # kept again: after equal leaf indexes
            kept.replace(order, model[n][2])
        if changes:
            assert all(kept.generation is not g for g in generations)
            generations.append(kept.generation)
        else:
            assert kept.generation is generations[-1]
    want = sorted(model.values(), key=lambda t: (t[0], t[1]))
    assert kept.orders == [t[0] for t in want]
    assert kept.opened == [t[2] for t in want]
    assert kept.ids == [o.cell.cell_id for o in kept.opened]
    assert kept.owners == [o.cell.holder_id for o in kept.opened]
    assert len(kept) == len(model)
    erased_ids = {n.to_bytes(32, "big") for n in erased}
    assert kept.holds_any(erased_ids) == any(k in erased_ids for k in kept.ids)


def test_a_commit_after_a_forget_elsewhere_replays_the_forget_before_its_own_leaf(
    tmp_path: Path,
) -> None:
    """Two processes: the post-commit sync takes a batch's own leaves as they are only when
    they follow the last leaf the cache applied. Here another process's FORGET lies between,
    so this process's next remember replays it from the log (no read comes first): the kept
    list drops the forgotten cell, and the holder's cell list holds the rest and the new one."""
    world = make_world(tmp_path)
    try:
        a, wide, cells = _kept(world, "lake", 3)
        kept = world.store.reader.cache.holder_index(a.holder_id).visible
        gone = cells[0]
        assert in_child(world, a.token, "saihm_forget", {"id": gone})["success"] is True
        new = world.call(a, "saihm_remember", content="lake 3")["cellId"]
        index = world.store.reader.cache.holder_index(a.holder_id)
        assert index is not None and index.cells is not None
        assert bytes.fromhex(gone) not in kept.ids
        assert [c.hex() for c in index.cells] == [*cells[1:], new]
        assert ids(world, wide) == [*cells[1:], new]
    finally:
        world.operator.store.close()
