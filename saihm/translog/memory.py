"""``MemoryTree``: an RFC 6962 tree held in memory, for verifiers that rebuild a log's tree.

Every complete subtree hash is kept, level by level, in one ``bytearray`` per level (32 bytes a
node, about 64 bytes a leaf in all), so any root or proof for any size up to the current one is
the pure assembly of ``saihm.translog.proof`` over a fetch that slices those arrays: no temporary
database, no recomputation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from hashlib import sha256

from saihm.errors import MalformedInput, NotFound, TooLarge, rejects
from saihm.translog import proof
from saihm.translog.hashing import HASH_SIZE
from saihm.translog.tiles import MAX_LEAF_SIZE

__all__ = ["MemoryTree"]


class MemoryTree:
    """An append-only Merkle tree in memory with the read API of ``MerkleTree``."""

    __slots__ = ("_levels",)

    @rejects()
    def __init__(self, leaves: Iterable[bytes] = ()) -> None:
        self._levels: list[bytearray] = [bytearray()]
        self.append_many(list(leaves))

    @property
    def size(self) -> int:
        """The number of leaves appended so far."""
        return len(self._levels[0]) // HASH_SIZE

    @rejects()
    def append_many(self, leaves: Sequence[bytes]) -> int:
        """Append ``leaves``; return the index of the first one.

        Raises ``TooLarge`` (before appending anything) for a leaf of 65,536 bytes or more, the
        log's own bound (entry bundles carry 16-bit lengths), and ``MalformedInput`` for a leaf
        that is not bytes.
        """
        for leaf in leaves:
            if not isinstance(leaf, bytes):
                raise MalformedInput("a log leaf is bytes")
            if len(leaf) > MAX_LEAF_SIZE:
                raise TooLarge("a log leaf must be under 65,536 bytes")
        # The leaf hash inlined as in TreeStorage.append (hashing.leaf_hash; a test checks that
        # the two agree).
        return self.append_hashes([sha256(b"\x00" + leaf).digest() for leaf in leaves])

    @rejects()
    def append_hashes(self, leaf_hashes: Sequence[bytes]) -> int:
        """Append leaves known by their leaf hashes; return the index of the first one."""
        first = self.size
        if any(len(h) != HASH_SIZE for h in leaf_hashes):
            raise MalformedInput("a leaf hash is 32 bytes")
        self._levels[0] += b"".join(leaf_hashes)
        level = 0
        while len(self._levels[level]) >= 2 * HASH_SIZE:
            if level + 1 == len(self._levels):
                self._levels.append(bytearray())
            below, above = self._levels[level], self._levels[level + 1]
            start, stop = len(above) // HASH_SIZE, len(below) // (2 * HASH_SIZE)
            view = memoryview(below)
            above += b"".join(
                sha256(b"\x01" + view[64 * j : 64 * j + 64]).digest() for j in range(start, stop)
            )
            level += 1
        return first

    @rejects()
    def fetch(self, ids: Sequence[proof.NodeId]) -> list[bytes]:
        """The hashes of complete subtrees ``(level, index)``; raise ``NotFound`` for another."""
        out = []
        levels = self._levels
        for level, index in ids:
            if level >= len(levels) or (index + 1) * HASH_SIZE > len(levels[level]):
                raise NotFound(f"no node at level {level}, index {index}")
            out.append(bytes(levels[level][index * HASH_SIZE : (index + 1) * HASH_SIZE]))
        return out

    def _size(self, size: int | None) -> int:
        if size is None:
            return self.size
        if type(size) is not int or size < 0:
            raise MalformedInput("tree size must be non-negative")
        if size > self.size:
            raise NotFound(f"tree size {size} is beyond the current tree")
        return size

    @rejects()
    def root(self, size: int | None = None) -> bytes:
        """MTH of the first ``size`` leaves (default: all); raises ``NotFound`` beyond them."""
        return proof.root(self._size(size), self.fetch)

    @rejects()
    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """PATH(index, D[0:size]) of RFC 9162 §2.1.3.1."""
        return proof.inclusion_proof(index, self._size(size), self.fetch)

    @rejects()
    def consistency_proof(self, size1: int, size2: int | None = None) -> list[bytes]:
        """PROOF(size1, D[0:size2]) of RFC 9162 §2.1.4.1."""
        return proof.consistency_proof(size1, self._size(size2), self.fetch)
