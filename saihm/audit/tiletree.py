"""The right edge of a log rebuilt tile by tile from its leaves (c2sp.org/tlog-tiles, height 8).

``TileTree`` holds, for every level, the hashes of the level's current incomplete tile: at most
255 hashes a level, so memory stays bounded however long the log. Appending leaf hashes fills
level 0; a tile that reaches 256 hashes is complete, is handed back to the caller (to be compared
with the tile a log serves), and its Merkle Tree Hash becomes the next hash of the level above
(tlog-tiles "Merkle Tree": each level-``L`` hash is the MTH of a full tile at level ``L - 1``).

The root of the tree at the current size follows from these partial tiles alone (RFC 9162
§2.1.1): split each level's partial tile into perfect subtrees by the bits of its width, take the
subtrees in order from the top level down (left to right in the tree), and fold them from the
right. The state serialises to a few kilobytes so a mirror can resume where it stopped.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

from saihm.errors import MalformedInput
from saihm.translog import EMPTY_ROOT, node_hash

__all__ = ["TileTree", "perfect_root", "root_from_tiles"]

HASH = 32
WIDTH = 256
_TILE_BYTES = HASH * WIDTH


def perfect_root(hashes: bytes) -> bytes:
    """MTH of ``2**k`` consecutive subtree hashes (concatenated), k >= 0 (RFC 9162 §2.1.1)."""
    level = [hashes[i : i + HASH] for i in range(0, len(hashes), HASH)]
    if not level or len(level) & (len(level) - 1):
        raise MalformedInput("perfect_root needs a power-of-two number of hashes")
    while len(level) > 1:
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


class TileTree:
    """A tree of ``size`` leaves known by the partial tile of every level (see module doc)."""

    def __init__(self, size: int = 0, partials: Iterable[bytes] = ()) -> None:
        self.size = size
        self.partials: list[bytearray] = [bytearray(p) for p in partials]
        for level, tile in enumerate(self.partials):
            if len(tile) != HASH * ((size >> (8 * level)) % WIDTH):
                raise MalformedInput(f"saved partial tile at level {level} has the wrong width")

    def append(self, leaf_hashes: Iterable[bytes]) -> list[tuple[int, int, bytes]]:
        """Append leaf hashes; return ``(level, index, tile)`` of every tile they complete."""
        done: list[tuple[int, int, bytes]] = []
        for h in leaf_hashes:
            self.size += 1
            level = 0
            while True:
                if level == len(self.partials):
                    self.partials.append(bytearray())
                tile = self.partials[level]
                tile += h
                if len(tile) < _TILE_BYTES:
                    break
                index = ((self.size >> (8 * level)) >> 8) - 1
                full = bytes(tile)
                done.append((level, index, full))
                tile.clear()
                h = perfect_root(full)
                level += 1
        return done

    def partial_tiles(self) -> list[tuple[int, int, int, bytes]]:
        """``(level, index, width, tile)`` of every partial tile the current size has."""
        out = []
        for level, tile in enumerate(self.partials):
            if tile:
                index = (self.size >> (8 * level)) >> 8
                out.append((level, index, len(tile) // HASH, bytes(tile)))
        return out

    def root(self) -> bytes:
        """MTH of the current tree (the empty tree's root when ``size`` is 0)."""
        parts: list[bytes] = []
        for tile in reversed(self.partials):
            width, offset = len(tile) // HASH, 0
            for bit in reversed(range(8)):
                if width >> bit & 1:
                    n = 1 << bit
                    parts.append(perfect_root(bytes(tile[offset * HASH : (offset + n) * HASH])))
                    offset += n
        if not parts:
            return EMPTY_ROOT
        root = parts[-1]
        for left in reversed(parts[:-1]):
            root = node_hash(left, root)
        return root

    def to_bytes(self) -> bytes:
        """``size`` (u64) then, per level, a u8 width and that many hashes."""
        out = bytearray(struct.pack(">QB", self.size, len(self.partials)))
        for tile in self.partials:
            out += struct.pack(">B", len(tile) // HASH) + tile
        return bytes(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> TileTree:
        """Inverse of ``to_bytes``; raises ``MalformedInput`` for anything else."""
        try:
            size, levels = struct.unpack_from(">QB", data)
            pos, partials = 9, []
            for _ in range(levels):
                width = data[pos]
                partials.append(data[pos + 1 : pos + 1 + width * HASH])
                pos += 1 + width * HASH
        except (struct.error, IndexError) as err:
            raise MalformedInput("saved tree state is truncated") from err
        if pos != len(data):
            raise MalformedInput("saved tree state has trailing bytes")
        return cls(size, partials)


def root_from_tiles(size: int, read: Callable[[int, int], bytes | None]) -> bytes | None:
    """MTH of the first ``size`` leaves of a tree known by its tiles (RFC 9162 §2.1.1).

    ``read(level, index)`` returns the tile's bytes (full, or a partial one at least as wide as
    needed), or None. The root is folded from one perfect subtree per set bit of ``size``; a
    subtree of height ``8L + r`` is ``2**r`` consecutive hashes of one tile at level ``L``.
    Returns None when a tile needed is missing or too narrow.
    """
    if size == 0:
        return EMPTY_ROOT
    parts: list[bytes] = []
    start = 0
    for height in reversed(range(64)):
        if not size >> height & 1:
            continue
        level, r = divmod(height, 8)
        first = start >> (8 * level)  # the subtree's first hash at that level
        tile = read(level, first >> 8)
        offset, n = first & (WIDTH - 1), 1 << r
        if tile is None or len(tile) < (offset + n) * HASH:
            return None
        parts.append(perfect_root(tile[offset * HASH : (offset + n) * HASH]))
        start += 1 << height
    root = parts[-1]
    for left in reversed(parts[:-1]):
        root = node_hash(left, root)
    return root
