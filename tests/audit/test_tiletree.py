"""``TileTree`` and ``root_from_tiles``: the mirror's tree, against the log's own storage.

The reference is ``saihm.translog.MerkleTree`` (whose tiles and roots are checked against Go's
sumdb/tlog and a naive tree in tests/translog). Hypothesis picks how leaves arrive (chunk sizes
across tile and level boundaries) and which historical sizes are asked for.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.audit.tiletree import TileTree, perfect_root, root_from_tiles
from saihm.errors import MalformedInput, NotFound
from saihm.translog import MerkleTree, leaf_hash


def _leaf(i: int) -> bytes:
    return hashlib.sha256(i.to_bytes(8, "big")).digest()[: 1 + i % 7]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> MerkleTree:
    tree = MerkleTree(tmp_path_factory.mktemp("ref"))
    tree.append_many([_leaf(i) for i in range(70_000)])
    yield tree
    tree.close()


def _read(tree: MerkleTree, size: int):
    def read(level: int, index: int) -> bytes | None:
        width = (size >> (8 * level)) - (index << 8)
        try:
            return tree.tile(level, index, None if width >= 256 else width)
        except (NotFound, MalformedInput):
            return None

    return read


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3, 255, 256, 257, 1000, 4096]), min_size=1, max_size=12))
def test_tile_tree_gives_the_log_s_tiles_and_roots_however_leaves_arrive(reference, chunks):
    tree, size = TileTree(), 0
    for n in chunks:
        for level, index, tile in tree.append(leaf_hash(_leaf(i)) for i in range(size, size + n)):
            assert tile == reference.tile(level, index)
        size += n
        assert tree.size == size and tree.root() == reference.root(size)
        for level, index, width, tile in tree.partial_tiles():
            assert tile == reference.tile(level, index, width)
        tree = TileTree.from_bytes(tree.to_bytes())  # a mirror that stopped and resumed


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 70_000), st.integers(0, 70_000))
def test_root_from_tiles_is_the_root_of_every_earlier_size(reference, a, b):
    size, earlier = max(a, b), min(a, b)
    assert root_from_tiles(earlier, _read(reference, size)) == reference.root(earlier)


def test_root_from_tiles_says_so_when_a_tile_is_missing(reference):
    read = _read(reference, 70_000)
    assert (
        root_from_tiles(300, lambda level, index: None if level == 0 else read(level, index))
        is None
    )
    assert root_from_tiles(300, lambda level, index: read(level, index)[:32]) is None


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00" * 8,
        b"\x00" * 8 + b"\x01",
        b"\x00" * 8 + b"\x01\x01" + bytes(31),
        (1).to_bytes(8, "big") + b"\x01\x00",
        TileTree().to_bytes() + b"x",
    ],
)
def test_saved_state_that_is_not_one_is_refused(raw):
    with pytest.raises(MalformedInput):
        TileTree.from_bytes(raw)


def test_perfect_root_needs_a_power_of_two():
    with pytest.raises(MalformedInput):
        perfect_root(bytes(96))
