"""Pure C2SP tlog-tiles arithmetic: tile coordinates, paths and entry bundles.

c2sp.org/tlog-tiles fixes the tile height at 8: a tile at level ``L`` holds up to 256 consecutive
hashes of height ``8 * L`` (level 0 holds leaf hashes), concatenated, 32 bytes each. A tile of
``W < 256`` hashes is a *partial* tile; it is always the ``W``-hash prefix of the eventual full
tile. An entry bundle ``tile/entries/N`` holds leaves ``256 * N`` onward, each prefixed by its
length as a 2-byte big-endian integer.

Nothing here touches storage; ``storage.py`` persists what these functions describe.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from saihm.errors import MalformedInput, TooLarge, rejects, require_type

__all__ = [
    "HASHES_PER_TILE",
    "MAX_LEAF_SIZE",
    "TILE_HEIGHT",
    "TilePath",
    "bundle_of",
    "bundle_range",
    "bundle_width",
    "changed_tiles",
    "decode_entry_bundle",
    "encode_entry_bundle",
    "first_leaf",
    "format_index",
    "parse_tile_path",
    "tile_path",
    "tile_widths",
]

TILE_HEIGHT = 8
HASHES_PER_TILE = 1 << TILE_HEIGHT
MAX_LEAF_SIZE = 0xFFFF
MAX_LEVEL = 63

# ASCII digits only: in a str pattern \d would also match other scripts' digits, which int()
# accepts, giving one tile a second URL.
_ELEMENT = re.compile(r"x[0-9]{3}")
_LAST = re.compile(r"[0-9]{3}")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True, slots=True)
class TilePath:
    """A parsed tile path; ``level`` None means an entry bundle, ``width`` None a full tile."""

    level: int | None
    index: int
    width: int | None


@rejects()
def format_index(index: int) -> str:
    """Encode a tile index as C2SP path elements: 1234067 → ``x001/x234/067``, 5 → ``005``."""
    if index < 0:
        raise MalformedInput("tile index must be non-negative")
    groups = []
    while True:
        groups.append(f"{index % 1000:03d}")
        index //= 1000
        if index == 0:
            break
    groups.reverse()
    return "/".join([f"x{g}" for g in groups[:-1]] + [groups[-1]])


@rejects()
def tile_path(level: int | None, index: int, width: int | None = None) -> str:
    """Return ``tile/<L>/<N>[.p/<W>]``, or ``tile/entries/<N>[.p/<W>]`` when ``level`` is None.

    Raises ``MalformedInput`` for a level outside 0..63 or a width outside 1..255.
    """
    if level is not None and not 0 <= level <= MAX_LEVEL:
        raise MalformedInput("tile level must be 0..63")
    if width is not None and not 0 < width < HASHES_PER_TILE:
        raise MalformedInput("partial tile width must be 1..255")
    head = "tile/entries" if level is None else f"tile/{level}"
    tail = "" if width is None else f".p/{width}"
    return f"{head}/{format_index(index)}{tail}"


@rejects()
def parse_tile_path(path: str) -> TilePath:
    """Parse a tile or entry-bundle path strictly (c2sp.org/tlog-tiles "Tiles" and "Entry bundles").

    Accepts exactly what ``tile_path`` produces: a level 0..63 or ``entries``, decimal without
    leading zeros; index elements of three digits, all but the last prefixed by ``x``, with no
    redundant leading ``x000`` element; an optional ``.p/<W>`` with W in 1..255 without leading
    zeros. Raises ``MalformedInput`` otherwise.
    """
    require_type(path, str, "parse_tile_path: path")
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tile":
        raise MalformedInput("tile path must start with tile/<L>/ or tile/entries/")
    level: int | None
    if parts[1] == "entries":
        level = None
    elif _DECIMAL.fullmatch(parts[1]) and int(parts[1]) <= MAX_LEVEL:
        level = int(parts[1])
    else:
        raise MalformedInput("tile level must be a decimal 0..63 without leading zeros")
    rest = parts[2:]
    width: int | None = None
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        if not _DECIMAL.fullmatch(rest[-1]) or not 0 < int(rest[-1]) < HASHES_PER_TILE:
            raise MalformedInput("partial tile width must be a decimal 1..255")
        width = int(rest[-1])
        rest = [*rest[:-2], rest[-2][:-2]]
    if not _LAST.fullmatch(rest[-1]) or not all(_ELEMENT.fullmatch(e) for e in rest[:-1]):
        raise MalformedInput("tile index must be x-prefixed 3-digit elements and a last one")
    if len(rest) > 1 and rest[0] == "x000":
        raise MalformedInput("tile index has a redundant leading x000 element")
    index = int("".join(e.lstrip("x") for e in rest))
    return TilePath(level, index, width)


@rejects()
def tile_widths(size: int, level: int) -> tuple[int, int]:
    """Return (full tiles, width of the partial tile or 0) at ``level`` for a tree of ``size``."""
    hashes = size >> (TILE_HEIGHT * level)
    return hashes >> TILE_HEIGHT, hashes & (HASHES_PER_TILE - 1)


def bundle_of(leaf_index: int) -> int:
    """The entry bundle (and level-0 tile) that holds leaf ``leaf_index`` (non-negative)."""
    return leaf_index >> TILE_HEIGHT


def first_leaf(level: int, index: int) -> int:
    """The first leaf under tile ``index`` of ``level``; entry bundle ``index`` is level 0's."""
    return index << (TILE_HEIGHT * (level + 1))


def bundle_range(start: int, end: int) -> range:
    """The entry bundles that hold leaves ``start`` to ``end - 1``, in order (empty when
    ``start >= end``); ``start`` is non-negative."""
    if start >= end:
        return range(0)
    return range(bundle_of(start), bundle_of(end - 1) + 1)


def bundle_width(size: int, n: int) -> int:
    """How many leaves entry bundle ``n`` holds in a log of ``size`` leaves: 256 when full, the
    partial bundle's width for the last one, 0 beyond the log."""
    return max(0, min(HASHES_PER_TILE, size - first_leaf(0, n)))


def changed_tiles(
    old_size: int, new_size: int, height: int = TILE_HEIGHT
) -> Iterator[tuple[int, int, int]]:
    """Yield (level, index, width) of every tile that growing the tree from old to new creates.

    Full tiles have width ``2**height``. This is Go's ``tlog.NewTiles``, parameterised by height
    only so that its published vectors can be checked; C2SP uses height 8.
    """
    level = 0
    while new_size >> (height * level) > 0:
        old_n = old_size >> (height * level)
        new_n = new_size >> (height * level)
        if old_n != new_n:
            for n in range(old_n >> height, new_n >> height):
                yield level, n, 1 << height
            n = new_n >> height
            width = new_n - (n << height)
            if width > 0:
                yield level, n, width
        level += 1


@rejects()
def encode_entry_bundle(leaves: Sequence[bytes]) -> bytes:
    """Return the entry bundle: each leaf as a 2-byte big-endian length then its bytes.

    Raises ``TooLarge`` for a leaf of 65,536 bytes or more, and ``MalformedInput`` for more
    than 256 leaves.
    """
    if len(leaves) > HASHES_PER_TILE:
        raise MalformedInput("an entry bundle holds at most 256 leaves")
    out = bytearray()
    for leaf in leaves:
        if len(leaf) > MAX_LEAF_SIZE:
            raise TooLarge("a log leaf must be under 65,536 bytes")
        out += len(leaf).to_bytes(2, "big")
        out += leaf
    return bytes(out)


@rejects()
def decode_entry_bundle(data: bytes) -> list[bytes]:
    """Split an entry bundle into its leaves; raise ``MalformedInput`` if truncated or overlong."""
    leaves: list[bytes] = []
    pos = 0
    while pos < len(data):
        if pos + 2 > len(data):
            raise MalformedInput("entry bundle ends inside a length prefix")
        n = int.from_bytes(data[pos : pos + 2], "big")
        if pos + 2 + n > len(data):
            raise MalformedInput("entry bundle ends inside a leaf")
        leaves.append(bytes(data[pos + 2 : pos + 2 + n]))
        pos += 2 + n
    if len(leaves) > HASHES_PER_TILE:
        raise MalformedInput("an entry bundle holds at most 256 leaves")
    return leaves
