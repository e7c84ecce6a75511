"""C2SP tlog-tiles arithmetic and paths against the published examples (c2sp.org/tlog-tiles)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saihm.errors import MalformedInput, TooLarge
from saihm.translog.tiles import (
    bundle_of,
    bundle_range,
    bundle_width,
    changed_tiles,
    decode_entry_bundle,
    encode_entry_bundle,
    first_leaf,
    format_index,
    parse_tile_path,
    tile_path,
    tile_widths,
)
from tests.translog.reftree import vectors_dir

C2SP = json.loads((vectors_dir() / "c2sp" / "spec_examples.json").read_text())
SUMDB = json.loads((vectors_dir() / "golang-mod-sumdb" / "note_and_tlog_vectors.json").read_text())


def test_index_is_encoded_in_x_prefixed_three_digit_elements() -> None:
    """tlog-tiles: "index 1234067 will be encoded as x001/x234/067"."""
    example = C2SP["tlog_tiles_index_encoding_example"]
    assert format_index(example["N"]) == example["path_element"]
    assert format_index(0) == "000"
    assert format_index(1000) == "x001/000"


@pytest.mark.parametrize("case", SUMDB["sumdb_tile_paths_height3_or_other"])
def test_tile_paths_match_the_go_sumdb_paths_without_the_height_element(case) -> None:
    # Go's sumdb paths carry the tile height as an extra element (tile/<H>/<L>/...); C2SP fixes
    # H = 8 and leaves it out. Full tiles have no .p/<W> suffix.
    width = None if case["W"] == 1 << case["H"] else case["W"]
    want = case["path"].replace(f"tile/{case['H']}/", "tile/", 1)
    assert tile_path(case["L"], case["N"], width) == want


def test_a_tree_of_70000_leaves_has_the_tiles_the_spec_lists() -> None:
    """tlog-tiles: 273 full level-0 tiles, one of width 112, one full level-1 tile, one of
    width 17, and one level-2 tile of width 1."""
    want = C2SP["tlog_tiles_size_70000_expected"]
    assert tile_widths(70_000, 0) == (want["full_level0"], want["partial_level0_width"])
    assert tile_widths(70_000, 1) == (want["full_level1"], want["partial_level1_width"])
    assert tile_widths(70_000, 2) == (0, want["partial_level2_width"])
    assert tile_widths(70_000, 3) == (0, 0)


def test_a_tree_of_256_leaves_has_one_full_tile_and_a_level_1_tile_of_width_1() -> None:
    assert tile_widths(256, 0) == (1, 0)
    assert tile_widths(256, 1) == (0, 1)


@pytest.mark.parametrize(("old", "new", "count"), SUMDB["sumdb_NewTiles_h10_counts"])
def test_changed_tiles_counts_match_go_newtiles(old: int, new: int, count: int) -> None:
    assert len(list(changed_tiles(old, new, height=10))) == count


@given(
    level=st.one_of(st.none(), st.integers(0, 63)),
    index=st.integers(0, 10**15),
    width=st.one_of(st.none(), st.integers(1, 255)),
)
def test_every_path_parses_back_to_its_tile(level, index, width) -> None:
    parsed = parse_tile_path(tile_path(level, index, width))
    assert (parsed.level, parsed.index, parsed.width) == (level, index, width)


@pytest.mark.parametrize(
    "path",
    [
        "tile/00/000",  # leading zero in the level
        "tile/64/000",  # level above 63
        "tile/0/01",  # index element of two digits
        "tile/0/x000/001",  # redundant leading x000 element
        "tile/0/001/002",  # inner element without x
        "tile/0/000.p/0",  # width 0
        "tile/0/000.p/256",  # a full tile has no .p suffix
        "tile/0/000.p/07",  # leading zero in the width
        "tile/0/000.p/",
        "tile/0/x001",  # the last element must not carry x
        "tile/entries",
        "tiles/0/000",
        "tile/0/\u0660\u0660\u0661",  # Arabic-Indic digits are not ASCII decimal
        "tile/1\u0660/000",
        "tile/0/000.p/1\u0660",
    ],
)
def test_non_canonical_tile_paths_are_rejected(path: str) -> None:
    """Only the one spelling tile_path produces is accepted, so one tile has one URL."""
    with pytest.raises(MalformedInput):
        parse_tile_path(path)


@given(st.lists(st.binary(max_size=300), max_size=256))
def test_entry_bundles_round_trip(leaves: list[bytes]) -> None:
    assert decode_entry_bundle(encode_entry_bundle(leaves)) == leaves


def test_entry_bundle_lengths_are_big_endian_uint16() -> None:
    assert encode_entry_bundle([b"", b"ab", b"\x00" * 0xFFFF])[:6] == b"\x00\x00\x00\x02ab"
    with pytest.raises(TooLarge):
        encode_entry_bundle([b"\x00" * 0x10000])


@pytest.mark.parametrize("data", [b"\x00", b"\x00\x02a", b"\x00\x00\x00"])
def test_truncated_entry_bundles_are_rejected(data: bytes) -> None:
    with pytest.raises(MalformedInput):
        decode_entry_bundle(data)


# The bundle arithmetic against the naive reading of tlog-tiles: "tile/entries/N" holds leaves
# 256 * N onward, and a level-L tile spans 256 ** (L + 1) leaves.
_SIZES = st.integers(min_value=0, max_value=5_000)


@given(st.integers(min_value=0, max_value=1 << 40))
def test_a_leaf_lies_in_the_bundle_of_its_index_divided_by_256(leaf: int) -> None:
    n = bundle_of(leaf)
    assert first_leaf(0, n) <= leaf < first_leaf(0, n + 1)
    assert n == leaf // 256


@given(st.integers(min_value=0, max_value=6), st.integers(min_value=0, max_value=1 << 20))
def test_a_tile_starts_at_its_index_times_its_span(level: int, index: int) -> None:
    assert first_leaf(level, index) == index * 256 ** (level + 1)


@given(_SIZES, _SIZES)
def test_bundle_range_is_every_bundle_holding_a_leaf_of_the_range(start: int, end: int) -> None:
    assert list(bundle_range(start, end)) == sorted({i // 256 for i in range(start, end)})


@given(_SIZES, st.integers(min_value=0, max_value=25))
def test_bundle_width_counts_the_leaves_of_the_bundle_in_the_log(size: int, n: int) -> None:
    assert bundle_width(size, n) == sum(1 for i in range(size) if i // 256 == n)
