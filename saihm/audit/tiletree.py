"""The right edge of a log rebuilt tile by tile from its leaves (c2sp.org/tlog-tiles, height 8).

``TileTree`` holds, for every level, the hashes of the level's current incomplete tile: at most
255 hashes a level, so memory stays bounded however long the log. Appending leaf hashes fills
level 0; a tile that reaches 256 hashes is complete, is handed back to the caller (to be compared
with the tile a log serves), and its Merkle Tree Hash becomes the next hash of the level above
(tlog-tiles "Merkle Tree": each level-``L`` hash is the MTH of a full tile at level ``L - 1``).

The root of the tree at the current size follows from these partial tiles alone (RFC 9162
§2.1.1): every node of ``saihm.translog.proof.root_nodes(size)`` lies in the partial tile of its
level, so the root is ``proof.root`` over ``TileNodes`` reading those tiles. The state
serialises to a few kilobytes so a mirror can resume where it stopped.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from saihm.errors import MalformedInput, NotFound
from saihm.translog import proof
from saihm.translog.tilenodes import ReadTile, TileNodes, perfect_root
from saihm.translog.tiles import HASHES_PER_TILE, tile_widths

__all__ = ["TileTree", "perfect_root", "root_from_tiles"]

HASH = 32
_TILE_BYTES = HASH * HASHES_PER_TILE


class TileTree:
    """A tree of ``size`` leaves known by the partial tile of every level (see module doc)."""

    def __init__(self, size: int = 0, partials: Iterable[bytes] = ()) -> None:
        self.size = size
        self.partials: list[bytearray] = [bytearray(p) for p in partials]
        for level, tile in enumerate(self.partials):
            if len(tile) != HASH * tile_widths(size, level)[1]:
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
                index = tile_widths(self.size, level)[0] - 1  # the tile just completed
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
                index = tile_widths(self.size, level)[0]
                out.append((level, index, len(tile) // HASH, bytes(tile)))
        return out

    def root(self) -> bytes:
        """MTH of the current tree (the empty tree's root when ``size`` is 0)."""
        return proof.root(self.size, TileNodes(self._partial))

    def _partial(self, level: int, index: int) -> bytes | None:
        """The partial tile ``(level, index)`` this tree holds, else None."""
        if level < len(self.partials) and index == tile_widths(self.size, level)[0]:
            return bytes(self.partials[level])
        return None

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


def root_from_tiles(size: int, read: ReadTile) -> bytes | None:
    """MTH of the first ``size`` leaves of a tree known by its tiles (RFC 9162 §2.1.1).

    ``read(level, index)`` returns the tile's bytes (full, or a partial one at least as wide as
    needed), or None: ``proof.root`` over ``TileNodes(read)``. Returns None when a tile needed
    is missing or too narrow.
    """
    try:
        return proof.root(size, TileNodes(read))
    except NotFound:
        return None
