"""C2SP tlog-tiles beyond the published examples in test_tiles.py, and served tiles.

Index and path spellings, every non-canonical path form, tile widths and ``changed_tiles`` by
hand and as a set difference, entry bundle edges. Served tiles and entry bundles of a
``MerkleTree`` are compared with tiles recomputed from scratch with ``leaf_hash`` and
``node_hash`` at several sizes up to 70,000 leaves (full and partial tiles at levels 0, 1, 2).
"""

from __future__ import annotations

import itertools
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.errors import MalformedInput, NotFound, TooLarge
from saihm.translog import MerkleTree, leaf_hash, node_hash
from saihm.translog.tiles import (
    HASHES_PER_TILE,
    MAX_LEAF_SIZE,
    TilePath,
    changed_tiles,
    decode_entry_bundle,
    encode_entry_bundle,
    format_index,
    parse_tile_path,
    tile_path,
    tile_widths,
)
from tests.translog.reftree import leaves_for

# -- paths -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "path"),
    [
        (0, "000"),
        (5, "005"),
        (42, "042"),
        (999, "999"),
        (1000, "x001/000"),
        (1001, "x001/001"),
        (123456, "x123/456"),
        (999999, "x999/999"),
        (1000000, "x001/x000/000"),
        (1234067, "x001/x234/067"),
        (2**40, "x001/x099/x511/x627/776"),
    ],
)
def test_format_index(index: int, path: str) -> None:
    assert format_index(index) == path


def test_format_index_rejects_negative() -> None:
    with pytest.raises(MalformedInput):
        format_index(-1)


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ((0, 0), "tile/0/000"),
        ((0, 0, 1), "tile/0/000.p/1"),
        ((0, 0, 255), "tile/0/000.p/255"),
        ((1, 1234067), "tile/1/x001/x234/067"),
        ((2, 1234067, 17), "tile/2/x001/x234/067.p/17"),
        ((63, 1), "tile/63/001"),
        ((None, 0), "tile/entries/000"),
        ((None, 5, 128), "tile/entries/005.p/128"),
        ((None, 1234067), "tile/entries/x001/x234/067"),
    ],
)
def test_tile_path(args, path: str) -> None:
    assert tile_path(*args) == path
    level, index, *rest = args
    assert parse_tile_path(path) == TilePath(level, index, rest[0] if rest else None)


@pytest.mark.parametrize(
    ("level", "width"), [(-1, None), (64, None), (0, 0), (0, 256), (0, -1), (None, 256)]
)
def test_tile_path_rejects(level, width) -> None:
    with pytest.raises(MalformedInput):
        tile_path(level, 0, width)


@settings(max_examples=300, deadline=None)
@given(
    level=st.one_of(st.none(), st.integers(0, 63)),
    index=st.integers(0, 2**40),
    width=st.one_of(st.none(), st.integers(1, 255)),
)
def test_parse_tile_path_round_trip(level, index, width) -> None:
    path = tile_path(level, index, width)
    assert parse_tile_path(path) == TilePath(level, index, width)
    assert all(part.isascii() for part in path.split("/"))


@pytest.mark.parametrize(
    "path",
    [
        "",
        "tile",
        "tile/0",
        "tile/0/",
        "tiles/0/000",
        "/tile/0/000",
        "tile/0/000/",
        "tile//000",
        "tile/00/000",  # level with a leading zero
        "tile/01/000",
        "tile/64/000",  # too many levels
        "tile/100/000",
        "tile/-1/000",
        "tile/+1/000",
        "tile/x/000",
        "tile/entry/000",
        "tile/0/0",  # index elements are three digits
        "tile/0/00",
        "tile/0/0000",
        "tile/0/5",
        "tile/0/-01",
        "tile/0/-001",
        "tile/0/+01",
        "tile/0/abc",
        "tile/0/0a0",
        "tile/0/ 00",
        "tile/0/x001",  # the last element has no x
        "tile/0/001/234",  # the others need one
        "tile/0/x01/234",
        "tile/0/x0001/234",
        "tile/0/X001/234",
        "tile/0/x000/005",  # redundant leading x000
        "tile/0/x000/x001/005",
        "tile/0/x001/x234/067/",
        "tile/0/000.p",  # .p without a width
        "tile/0/000.p/",
        "tile/0/000.p/0",
        "tile/0/000.p/256",
        "tile/0/000.p/01",
        "tile/0/000.p/-1",
        "tile/0/000.p/+1",
        "tile/0/000.p/1/2",
        "tile/0/000.q/1",
        "tile/0/000p/1",
        "tile/0/.p/1",
        "tile/0/x001/.p/1",
        "tile/0/000.p/x001/000",
        "tile/entries/000.p/256",
        "tile/entries/000.p/0",
        "tile/entries/x000/001",
        "tile/entries",
        "tile/entries/",
        "tile/\uff10/000",  # fullwidth zero
        "tile/1\u0660/000",  # Arabic-Indic digit in the level
        "tile/0/\u0660\u0660\u0665",  # Arabic-Indic digits in the index
        "tile/0/x\u0661\u0662\u0663/000",
        "tile/0/000.p/1\u0660",  # Arabic-Indic digit in the width
        "tile/0/\uff10\uff10\uff15",  # fullwidth digits
    ],
)
def test_parse_tile_path_rejects(path: str) -> None:
    with pytest.raises(MalformedInput):
        parse_tile_path(path)


# -- tile widths and changed tiles -------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "level", "want"),
    [
        (0, 0, (0, 0)),
        (0, 1, (0, 0)),
        (1, 0, (0, 1)),
        (1, 1, (0, 0)),
        (255, 0, (0, 255)),
        (256, 0, (1, 0)),
        (256, 1, (0, 1)),
        (257, 0, (1, 1)),
        (511, 1, (0, 1)),
        (512, 1, (0, 2)),
        (65535, 0, (255, 255)),
        (65535, 1, (0, 255)),
        (65535, 2, (0, 0)),
        (65536, 0, (256, 0)),
        (65536, 1, (1, 0)),
        (65536, 2, (0, 1)),
        (2**64 - 1, 7, (0, 255)),
        (2**64 - 1, 6, (255, 255)),
        (2**64 - 1, 0, (2**56 - 1, 255)),
    ],
)
def test_tile_widths(size: int, level: int, want: tuple[int, int]) -> None:
    assert tile_widths(size, level) == want


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (0, 0, []),
        (5, 5, []),
        (256, 256, []),
        (0, 1, [(0, 0, 1)]),
        (1, 2, [(0, 0, 2)]),
        (0, 255, [(0, 0, 255)]),
        (0, 256, [(0, 0, 256), (1, 0, 1)]),
        (255, 256, [(0, 0, 256), (1, 0, 1)]),
        (255, 257, [(0, 0, 256), (0, 1, 1), (1, 0, 1)]),
        (256, 257, [(0, 1, 1)]),
        (256, 512, [(0, 1, 256), (1, 0, 2)]),
        (300, 600, [(0, 1, 256), (0, 2, 88), (1, 0, 2)]),
        (65535, 65536, [(0, 255, 256), (1, 0, 256), (2, 0, 1)]),
        (70000, 70001, [(0, 273, 113)]),
    ],
)
def test_changed_tiles_by_hand(old: int, new: int, want) -> None:
    assert list(changed_tiles(old, new)) == want


def _tiles_at(size: int) -> set[tuple[int, int, int]]:
    """Every (level, index, width) a tree of ``size`` serves, from ``tile_widths``."""
    out = set()
    level = 0
    while size >> (8 * level):
        full, partial = tile_widths(size, level)
        out |= {(level, n, HASHES_PER_TILE) for n in range(full)}
        if partial:
            out.add((level, full, partial))
        level += 1
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**24), st.integers(0, 2**24))
def test_changed_tiles_are_the_new_tiles(a: int, b: int) -> None:
    old, new = min(a, b), max(a, b)
    changed = list(changed_tiles(old, new))
    assert len(changed) == len(set(changed))
    assert set(changed) == _tiles_at(new) - _tiles_at(old)


# -- entry bundles -----------------------------------------------------------------------------


def test_entry_bundle_format() -> None:
    assert encode_entry_bundle([]) == b""
    assert encode_entry_bundle([b"", b"a", b"bc"]) == b"\x00\x00\x00\x01a\x00\x02bc"
    big = b"x" * MAX_LEAF_SIZE
    assert encode_entry_bundle([big]) == b"\xff\xff" + big
    assert decode_entry_bundle(b"\xff\xff" + big) == [big]
    assert decode_entry_bundle(b"") == []


LEAVES = st.lists(
    st.one_of(st.binary(max_size=300), st.sampled_from([b"x" * 65535, b"y" * 256])),
    max_size=HASHES_PER_TILE,
)


@settings(max_examples=100, deadline=None)
@given(LEAVES)
def test_entry_bundle_round_trip(leaves: list[bytes]) -> None:
    data = encode_entry_bundle(leaves)
    assert len(data) == sum(2 + len(x) for x in leaves)
    assert decode_entry_bundle(data) == leaves


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=20), min_size=1, max_size=8))
def test_every_truncated_bundle_is_rejected(leaves: list[bytes]) -> None:
    data = encode_entry_bundle(leaves)
    boundaries = {0}
    pos = 0
    for leaf in leaves:
        pos += 2 + len(leaf)
        boundaries.add(pos)
    for cut in range(len(data)):
        if cut in boundaries:
            assert len(decode_entry_bundle(data[:cut])) <= len(leaves)
        else:
            with pytest.raises(MalformedInput):
                decode_entry_bundle(data[:cut])


@pytest.mark.parametrize(
    "data", [b"\x00", b"\x00\x05abc", b"\x00\x00\x00", b"\xff\xff" + b"x" * 10]
)
def test_decode_entry_bundle_rejects(data: bytes) -> None:
    with pytest.raises(MalformedInput):
        decode_entry_bundle(data)


def test_leaves_of_65536_bytes_or_more_are_refused() -> None:
    for size in (MAX_LEAF_SIZE + 1, 100_000):
        with pytest.raises(TooLarge):
            encode_entry_bundle([b"ok", b"x" * size])


def test_at_most_256_leaves_per_bundle() -> None:
    encode_entry_bundle([b""] * 256)
    with pytest.raises(MalformedInput):
        encode_entry_bundle([b""] * 257)
    assert decode_entry_bundle(b"\x00\x00" * 256) == [b""] * 256
    with pytest.raises(MalformedInput):
        decode_entry_bundle(b"\x00\x00" * 257)


# -- served tiles against tiles recomputed from scratch ----------------------------------------

SIZES = [1, 2, 3, 255, 256, 257, 511, 512, 513, 1000, 4096, 65535, 65536, 65537, 70000]


def _subtree_root(hashes: list[bytes]) -> bytes:
    """MTH of a power-of-two number of hashes, level by level."""
    assert hashes and len(hashes) & (len(hashes) - 1) == 0
    while len(hashes) > 1:
        hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
    return hashes[0]


def _levels(leaves: list[bytes]) -> list[list[bytes]]:
    """The hashes tiles hold: level 0 leaf hashes, level L the complete 256**L-leaf subtrees."""
    levels = [[leaf_hash(x) for x in leaves]]
    while len(levels[-1]) >= HASHES_PER_TILE:
        below = levels[-1]
        levels.append(
            [
                _subtree_root(below[i : i + HASHES_PER_TILE])
                for i in range(0, len(below) - HASHES_PER_TILE + 1, HASHES_PER_TILE)
            ]
        )
    return levels


@pytest.fixture(scope="module")
def grown_tree():
    """A tree grown to each of ``SIZES``; yields (size, served tiles, entry bundles) per size."""
    leaves = leaves_for(SIZES[-1])
    levels = _levels(leaves)
    snapshots = []
    with tempfile.TemporaryDirectory() as d, MerkleTree(d) as tree:
        done = 0
        for size in SIZES:
            tree.append_many(leaves[done:size])
            done = size
            assert tree.size == size
            served = {}
            for level in range(4):
                full, partial = tile_widths(size, level)
                for n in range(full):
                    served[level, n, None] = tree.tile(level, n)
                if partial:
                    served[level, full, partial] = tree.tile(level, full, partial)
                    if partial < 255:
                        with pytest.raises(NotFound):
                            tree.tile(level, full, partial + 1)
                    with pytest.raises(NotFound):
                        tree.tile(level, full)
                with pytest.raises(NotFound):
                    tree.tile(level, full + (1 if partial else 0), 1)
            full, partial = tile_widths(size, 0)
            bundles = {(n, None): tree.entry_bundle(n) for n in range(full)}
            if partial:
                bundles[full, partial] = tree.entry_bundle(full, partial)
            snapshots.append((size, served, bundles))
        prefixes = {w: tree.tile(0, 273, w) for w in (1, 50, 112)}
        level1 = {w: tree.tile(1, 1, w) for w in (1, 17)}
    yield leaves, levels, snapshots, prefixes, level1


def test_served_tiles_equal_recomputed_tiles(grown_tree) -> None:
    _, levels, snapshots, _, _ = grown_tree
    checked = set()
    for size, served, _ in snapshots:
        assert set(served) == {
            (lv, n, None if w == HASHES_PER_TILE else w) for lv, n, w in _tiles_at(size)
        }
        for (level, n, width), data in served.items():
            w = HASHES_PER_TILE if width is None else width
            want = b"".join(levels[level][n * HASHES_PER_TILE : n * HASHES_PER_TILE + w])
            assert len(want) == 32 * w
            assert data == want, (size, level, n, width)
            checked.add((level, width is None))
    # Full and partial tiles at levels 0 and 1 and a partial tile at level 2 were all compared.
    assert checked >= {(0, True), (0, False), (1, True), (1, False), (2, False)}


def test_level_two_tile_is_the_root_of_the_first_65536_leaves(grown_tree) -> None:
    leaves, _, snapshots, _, _ = grown_tree
    _, served, _ = snapshots[-1]
    assert served[2, 0, 1] == _subtree_root([leaf_hash(x) for x in leaves[:65536]])


def test_partial_tiles_are_prefixes(grown_tree) -> None:
    _, levels, _, prefixes, level1 = grown_tree
    for w, data in prefixes.items():
        assert data == b"".join(levels[0][273 * 256 : 273 * 256 + w])
    for w, data in level1.items():
        assert data == b"".join(levels[1][256 : 256 + w])


def test_served_entry_bundles_equal_recomputed_bundles(grown_tree) -> None:
    leaves, _, snapshots, _, _ = grown_tree
    for size, _, bundles in snapshots:
        for (n, width), data in bundles.items():
            w = HASHES_PER_TILE if width is None else width
            want = leaves[n * HASHES_PER_TILE : n * HASHES_PER_TILE + w]
            assert data == encode_entry_bundle(want), (size, n, width)
            assert decode_entry_bundle(data) == want


def test_tiles_grow_as_changed_tiles_says(grown_tree) -> None:
    _, _, snapshots, _, _ = grown_tree
    for (old, before, _), (new, after, _) in itertools.pairwise(snapshots):
        new_keys = {
            (lv, n, None if w == HASHES_PER_TILE else w) for lv, n, w in changed_tiles(old, new)
        }
        assert set(after) - set(before) == new_keys
        # A tile that did not change is served byte for byte as before.
        for key in set(after) & set(before):
            assert after[key] == before[key]


def test_served_tile_requests_out_of_range(tmp_path) -> None:
    with MerkleTree(tmp_path) as tree:
        with pytest.raises(NotFound):
            tree.tile(0, 0, 1)
        tree.append_many([b"a", b"b"])
        assert tree.tile(0, 0, 2) == leaf_hash(b"a") + leaf_hash(b"b")
        for level, index, width in [(0, 0, 0), (0, 0, 257), (64, 0, 1), (-1, 0, 1), (0, -1, 1)]:
            with pytest.raises(MalformedInput):
                tree.tile(level, index, width)
