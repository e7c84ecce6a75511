"""saihm.translog.proof: one proof construction over a "fetch these nodes" callable.

Every root and proof it builds, over every fetch the code base uses (LMDB tiles and node blocks,
memory, C2SP tiles), equals RFC 9162's recursive definitions (tests/translog/reftree.py) and
verifies with ``verify_inclusion`` / ``verify_consistency``, for random sizes that straddle tile
boundaries (256, 65,536 leaves) and end in partial tiles.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saihm.errors import MalformedInput, NotFound, SaihmError, TooLarge
from saihm.translog import (
    MerkleTree,
    leaf_hash,
    node_hash,
    proof,
    verify_consistency,
    verify_inclusion,
)
from saihm.translog.memory import MemoryTree
from saihm.translog.proof import NodeId
from saihm.translog.tilenodes import TileNodes, perfect_root
from saihm.translog.tiles import HASHES_PER_TILE, changed_tiles
from tests.translog.reftree import hashes_for, leaves_for, ref_path, ref_root, ref_subproof

# Sizes around the tile boundaries of levels 0 and 1, and ones ending in partial tiles.
_EDGES = [1, 2, 3, 255, 256, 257, 511, 512, 513, 767, 1000, 1024, 1025]


def _levels(hashes: list[bytes]) -> list[list[bytes]]:
    levels = [hashes]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append([node_hash(below[2 * i], below[2 * i + 1]) for i in range(len(below) // 2)])
    return levels


def _naive_fetch(hashes: list[bytes]):
    levels = _levels(hashes)

    def fetch(ids: Sequence[NodeId]) -> list[bytes]:
        return [levels[level][index] for level, index in ids]

    return fetch


def _ref_nodes(begin: int, end: int) -> list[NodeId]:
    """The compact range by recursion: the largest aligned perfect subtree starting at begin."""
    out = []
    while begin < end:
        level = 0
        while begin % (2 << level) == 0 and begin + (2 << level) <= end:
            level += 1
        out.append((level, begin >> level))
        begin += 1 << level
    return out


@given(st.integers(0, 5000), st.integers(0, 5000))
def test_range_nodes_are_the_aligned_perfect_subtrees_covering_the_range(a: int, b: int) -> None:
    begin, end = min(a, b), max(a, b)
    assert proof.range_nodes(begin, end) == _ref_nodes(begin, end)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_proofs_over_a_naive_fetch_equal_rfc_9162(data: st.DataObject) -> None:
    size = data.draw(st.one_of(st.sampled_from(_EDGES), st.integers(1, 1100)))
    hashes = hashes_for(leaves_for(size))
    fetch = _naive_fetch(hashes)
    assert proof.root(size, fetch) == ref_root(hashes)
    index = data.draw(st.integers(0, size - 1))
    path = proof.inclusion_proof(index, size, fetch)
    assert path == ref_path(index, hashes)
    verify_inclusion(hashes[index], index, size, path, ref_root(hashes))
    size1 = data.draw(st.integers(1, size))
    consistency = proof.consistency_proof(size1, size, fetch)
    assert consistency == ref_subproof(size1, hashes[:size], True)
    verify_consistency(size1, size, consistency, ref_root(hashes[:size1]), ref_root(hashes))


@pytest.mark.parametrize("size", range(1, 70))
def test_every_proof_of_small_trees_equals_rfc_9162(size: int) -> None:
    hashes = hashes_for(leaves_for(size))
    fetch = _naive_fetch(hashes)
    for index in range(size):
        assert proof.inclusion_proof(index, size, fetch) == ref_path(index, hashes)
    for size1 in range(1, size + 1):
        assert proof.consistency_proof(size1, size, fetch) == ref_subproof(size1, hashes, True)


def test_a_proof_fetches_only_complete_subtrees_and_each_once() -> None:
    size = 1000
    seen: list[NodeId] = []
    fetch = _naive_fetch(hashes_for(leaves_for(size)))

    def recording(ids: Sequence[NodeId]) -> list[bytes]:
        seen.extend(ids)
        return fetch(ids)

    for index in (0, 255, 256, 511, 999):
        seen.clear()
        proof.inclusion_proof(index, size, recording)
        assert len(seen) == len(set(seen))
        assert all((i + 1) << level <= size for level, i in seen)


def test_bad_arguments_raise_malformed_input_before_any_fetch() -> None:
    def fetch(ids: Sequence[NodeId]) -> list[bytes]:
        raise AssertionError("fetched for bad arguments")

    for call in (
        lambda: proof.inclusion_proof(5, 5, fetch),
        lambda: proof.inclusion_proof(-1, 5, fetch),
        lambda: proof.inclusion_proof(0, 1 << 64, fetch),
        lambda: proof.consistency_proof(0, 5, fetch),
        lambda: proof.consistency_proof(6, 5, fetch),
        lambda: proof.root(-1, fetch),
        lambda: proof.root("3", fetch),  # type: ignore[arg-type]
    ):
        with pytest.raises(MalformedInput):
            call()
    assert proof.consistency_proof(5, 5, fetch) == []


def test_a_fetch_that_returns_too_few_hashes_is_refused() -> None:
    with pytest.raises(SaihmError):
        proof.root(7, lambda ids: [bytes(32)])


# -- the fetches the code base uses ------------------------------------------------------------


@pytest.fixture(scope="module")
def lmdb_tree():
    """One LMDB tree grown in uneven batches to 1,100 leaves (past 4 level-0 tiles)."""
    leaves = leaves_for(1100)
    with tempfile.TemporaryDirectory() as tmp, MerkleTree(tmp) as tree:
        pos = 0
        for step in (1, 254, 1, 1, 300, 211, 256, 76):
            tree.append_many(leaves[pos : pos + step])
            pos += step
        assert pos == 1100
        yield tree, hashes_for(leaves)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_tree_storage_proofs_equal_rfc_9162(lmdb_tree, data: st.DataObject) -> None:
    tree, hashes = lmdb_tree
    size = data.draw(
        st.one_of(st.sampled_from([s for s in _EDGES if s <= 1100]), st.integers(1, 1100))
    )
    index = data.draw(st.integers(0, size - 1))
    size1 = data.draw(st.integers(1, size))
    assert tree.root(size) == ref_root(hashes[:size])
    assert tree.inclusion_proof(index, size) == ref_path(index, hashes[:size])
    assert tree.consistency_proof(size1, size) == ref_subproof(size1, hashes[:size], True)


def test_tree_storage_writes_exactly_what_hashing_py_gives(lmdb_tree) -> None:
    """The inlined fast path of TreeStorage.append agrees with leaf_hash and node_hash."""
    tree, hashes = lmdb_tree
    levels = _levels(hashes)
    with tree._env.read() as txn:
        for height in range(len(levels)):
            for index in range(len(levels[height])):
                assert tree.storage.node(txn, height, index) == levels[height][index]
    for level, index, width in changed_tiles(0, 1100):
        want = b"".join(levels[8 * level][index * 256 : index * 256 + width])
        assert tree.tile(level, index, None if width == 256 else width) == want


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=600), st.data())
def test_memory_tree_proofs_equal_rfc_9162_and_the_lmdb_tree(
    leaves: list[bytes], data: st.DataObject
) -> None:
    mem = MemoryTree()
    pos = 0
    while pos < len(leaves):
        step = data.draw(st.integers(1, 300))
        assert mem.append_many(leaves[pos : pos + step]) == pos
        pos += step
    hashes = [leaf_hash(x) for x in leaves]
    size = data.draw(st.integers(1, len(leaves)))
    index = data.draw(st.integers(0, size - 1))
    size1 = data.draw(st.integers(1, size))
    assert mem.size == len(leaves)
    assert mem.root(size) == ref_root(hashes[:size])
    assert mem.inclusion_proof(index, size) == ref_path(index, hashes[:size])
    assert mem.consistency_proof(size1, size) == ref_subproof(size1, hashes[:size], True)


def test_memory_tree_leaf_hash_fast_path_agrees_with_hashing_py() -> None:
    leaves = [hashlib.sha256(i.to_bytes(2, "big")).digest()[: i % 33] for i in range(300)]
    mem = MemoryTree(leaves)
    assert mem.fetch([(0, i) for i in range(300)]) == [leaf_hash(x) for x in leaves]
    levels = _levels([leaf_hash(x) for x in leaves])
    assert mem.fetch([(1, i) for i in range(150)]) == levels[1]


def test_memory_tree_refuses_what_the_log_refuses() -> None:
    mem = MemoryTree([b"a"])
    with pytest.raises(TooLarge):
        mem.append_many([b"b", bytes(65536)])
    assert mem.size == 1
    with pytest.raises(NotFound):
        mem.root(2)
    with pytest.raises(MalformedInput):
        mem.inclusion_proof(1, 1)


def _tiles_of(hashes: list[bytes], size: int) -> dict[tuple[int, int], bytes]:
    """Every tile of the tree of ``size`` (full, or partial at the right edge), by coordinates."""
    levels = _levels(hashes[:size])
    return {
        (level, index): b"".join(levels[8 * level][index * 256 : index * 256 + width])
        for level, index, width in changed_tiles(0, size)
    }


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_proofs_over_tiles_equal_rfc_9162(data: st.DataObject) -> None:
    size = data.draw(st.one_of(st.sampled_from(_EDGES), st.integers(1, 1100)))
    hashes = hashes_for(leaves_for(size))
    tiles = _tiles_of(hashes, size)
    fetch = TileNodes(lambda level, index: tiles.get((level, index)))
    index = data.draw(st.integers(0, size - 1))
    size1 = data.draw(st.integers(1, size))
    assert proof.root(size, fetch) == ref_root(hashes)
    assert proof.inclusion_proof(index, size, fetch) == ref_path(index, hashes)
    assert proof.consistency_proof(size1, size, fetch) == ref_subproof(size1, hashes, True)
    # A historical size is served by the same tiles (a partial tile is a prefix of the full one).
    assert proof.root(size1, fetch) == ref_root(hashes[:size1])


def test_tile_nodes_past_a_level_1_boundary() -> None:
    """65,537 leaves: the first level-1 tile is full and level 2 holds its hash."""
    size = HASHES_PER_TILE**2 + 1
    hashes = [hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(size)]
    tiles = _tiles_of(hashes, size)
    assert (2, 0) in tiles
    fetch = TileNodes(lambda level, index: tiles.get((level, index)))
    root = proof.root(size, fetch)
    mem = MemoryTree()
    mem.append_hashes(hashes)
    assert root == mem.root()
    for index in (0, 65535, 65536):
        path = proof.inclusion_proof(index, size, fetch)
        assert path == mem.inclusion_proof(index)
        verify_inclusion(hashes[index], index, size, path, root)


def test_tile_nodes_raise_not_found_for_a_missing_or_narrow_tile() -> None:
    hashes = hashes_for(leaves_for(300))
    tiles = _tiles_of(hashes, 300)
    narrow = dict(tiles)
    narrow[0, 1] = narrow[0, 1][:32]
    with pytest.raises(NotFound):
        proof.root(300, TileNodes(lambda level, index: narrow.get((level, index))))
    with pytest.raises(NotFound):
        proof.root(300, TileNodes(lambda level, index: None))


def test_perfect_root_needs_a_power_of_two() -> None:
    with pytest.raises(MalformedInput):
        perfect_root(bytes(96))
    with pytest.raises(MalformedInput):
        perfect_root(b"")
    a, b = bytes(32), b"\x01" * 32
    assert perfect_root(a + b) == node_hash(a, b)
