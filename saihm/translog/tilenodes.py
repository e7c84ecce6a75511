"""Node hashes read from C2SP tiles, as a fetch for ``saihm.translog.proof``.

A complete subtree of height ``8 * L + r`` is ``2**r`` consecutive hashes of one tile at level
``L`` (c2sp.org/tlog-tiles "Merkle Tree"): height ``8 * L`` is a hash the tile holds, a greater
one the Merkle Tree Hash of a power-of-two run of them. So any root or proof of a tiled log
needs only the tiles that hold its nodes, read once each, wherever they come from: a mirror's
directory, a publication, or a log over HTTP (``saihm.audit.fetch``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from saihm.errors import MalformedInput, NotFound, rejects
from saihm.translog.hashing import HASH_SIZE, node_hash
from saihm.translog.proof import NodeId
from saihm.translog.tiles import HASHES_PER_TILE, TILE_HEIGHT

__all__ = ["ReadTile", "TileNodes", "perfect_root"]

#: ``read(level, index)``: the tile's bytes (full, or a partial tile at least as wide as any
#: node asked of it needs), or None when it is not there.
ReadTile = Callable[[int, int], bytes | None]


@rejects()
def perfect_root(hashes: bytes) -> bytes:
    """MTH of ``2**k`` consecutive subtree hashes (concatenated), k >= 0 (RFC 9162 §2.1.1).

    Raises ``MalformedInput`` unless ``hashes`` holds a power-of-two number of 32-byte hashes.
    """
    n = len(hashes) // HASH_SIZE
    if not n or n & (n - 1) or len(hashes) % HASH_SIZE:
        raise MalformedInput("perfect_root needs a power-of-two number of hashes")
    level = [hashes[i : i + HASH_SIZE] for i in range(0, len(hashes), HASH_SIZE)]
    while len(level) > 1:
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return bytes(level[0])


class TileNodes:
    """A ``FetchNodes`` over tiles: ``TileNodes(read)(ids)``, each tile read at most once."""

    __slots__ = ("_cache", "_read")

    def __init__(self, read: ReadTile) -> None:
        self._read = read
        self._cache: dict[tuple[int, int], bytes | None] = {}

    @rejects()
    def __call__(self, ids: Sequence[NodeId]) -> list[bytes]:
        """The hash of every node; raise ``NotFound`` for one whose tile is missing or short."""
        return [self.node(level, index) for level, index in ids]

    @rejects()
    def node(self, height: int, index: int) -> bytes:
        """The hash of the complete subtree of ``2**height`` leaves from ``index << height``."""
        level, rel = divmod(height, TILE_HEIGHT)
        first = index << rel  # the subtree's first hash at tile level `level`
        key = (level, first >> TILE_HEIGHT)
        if key not in self._cache:
            self._cache[key] = self._read(*key)
        tile = self._cache[key]
        offset, count = first & (HASHES_PER_TILE - 1), 1 << rel
        if tile is None or len(tile) < (offset + count) * HASH_SIZE:
            raise NotFound(f"no tile holds the node at height {height}, index {index}")
        run = tile[offset * HASH_SIZE : (offset + count) * HASH_SIZE]
        return bytes(run) if count == 1 else perfect_root(run)
