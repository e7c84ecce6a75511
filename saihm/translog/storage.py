"""The RFC 6962 log inside a storage (saihm/storage) that someone else owns.

Layout (docs/formats.md §1; three named databases, ``TreeStorage.DB_NAMES``):

- ``leaves``: key = leaf index as u64 big-endian, value = the leaf bytes (under 65,536 bytes).
- ``tree``: key = tile level (u8) || tile index (u64 big-endian), value = the C2SP tile at its
  current width, byte-exact: the concatenated 32-byte hashes of height ``8 * level``. A partial
  tile of width W for any historical tree size is the W-hash prefix of this value.
- ``tree_nodes``: key = tile level (u8) || tile index (u64 big-endian), value = an 8,128-byte
  block of the interior hashes *under* that tile: heights ``8L+1`` .. ``8L+7`` of the subtrees
  covering the tile's 256 hashes, ordered by height then index (128 + 64 + ... + 2 hashes),
  zero-filled where a subtree is not complete yet.

So every complete-subtree hash costs one read (of a tile or a block, cached per call), and any
root or proof for any historical size costs O(log n) reads and no recomputation. Entry bundles
are assembled from ``leaves`` by one range scan
(deterministic, byte-exact) rather than stored twice.

Roots and proofs are ``saihm.translog.proof`` over ``TreeStorage.fetch(txn)``, which reads the
nodes a proof needs from ``tree`` and ``tree_nodes`` inside the caller's transaction. Tile
constants come from ``tiles.py``. ``append`` inlines the two hashes of ``hashing.py``
(``sha256(b"\x00" + leaf)`` and ``sha256(b"\x01" + left + right)``): a function call per hash
would cost more than the hash of a short node, and ``tests/translog/test_proof.py`` checks on
random trees that every tile and node block written equals what ``leaf_hash``/``node_hash`` give.

There is no in-memory state: the tree size is the last key of ``leaves`` plus one, read inside
the caller's transaction, so several processes may share the storage; the storage's single
writer (saihm/storage/base.py) serialises appends.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from hashlib import sha256
from itertools import islice

from saihm.errors import MalformedInput, NotFound, TooLarge, VerificationFailed
from saihm.storage.base import Namespace, ReadTxn, Storage, WriteTxn
from saihm.translog import proof
from saihm.translog.hashing import HASH_SIZE
from saihm.translog.tiles import HASHES_PER_TILE, MAX_LEAF_SIZE, TILE_HEIGHT, encode_entry_bundle

__all__ = ["TreeStorage"]

_U64 = struct.Struct(">Q")
_NODE_KEY = struct.Struct(">BQ")
_TILE_MASK = HASHES_PER_TILE - 1
_ZERO_HASH = bytes(HASH_SIZE)
# Offsets of each relative height 1..7 inside an interior-node block: 128 hashes of relative
# height 1, then 64 of height 2, ..., then 2 of height 7 (254 hashes, 8,128 bytes).
_BLOCK_BASE = [0, 0]
for _rel in range(2, TILE_HEIGHT):
    _BLOCK_BASE.append(_BLOCK_BASE[-1] + (HASHES_PER_TILE >> (_rel - 1)) * HASH_SIZE)
_BLOCK_SIZE = _BLOCK_BASE[-1] + (HASHES_PER_TILE >> (TILE_HEIGHT - 1)) * HASH_SIZE


class TreeStorage:
    """An append-only Merkle tree over the namespaces of a caller's storage.

    Every method takes an open transaction of that storage first (:class:`ReadTxn`); writes
    need the write transaction (:class:`WriteTxn`) and become visible when the caller commits
    it.
    """

    DB_NAMES: tuple[bytes, ...] = (b"leaves", b"tree", b"tree_nodes")

    def __init__(self, storage: Storage) -> None:
        """Use the namespaces of ``DB_NAMES`` in ``storage`` (opened with them)."""
        self._leaves = storage.namespace(b"leaves")
        self._tiles = storage.namespace(b"tree")
        self._nodes = storage.namespace(b"tree_nodes")

    @property
    def leaves_namespace(self) -> Namespace:
        """The namespace of the leaves, whose last key gives the size (:meth:`size`)."""
        return self._leaves

    # -- reads --------------------------------------------------------------------------------

    def size(self, txn: ReadTxn) -> int:
        """Return the number of leaves in the tree as seen by ``txn``."""
        last = txn.last(self._leaves)
        if last is None:
            return 0
        index: int = _U64.unpack(last[0])[0]  # the struct's one field, a ">Q"
        return index + 1

    def dense(self, txn: ReadTxn) -> bool:
        """Whether the stored leaves are exactly the indexes ``0 .. size - 1``: false when a leaf
        was deleted from inside the log or a row inserted beyond its end (a raw edit), which
        would make :meth:`size` claim leaves that were never appended."""
        return txn.count(self._leaves) == self.size(txn)

    def leaf(self, txn: ReadTxn, index: int) -> bytes:
        """Return leaf ``index``; raise ``NotFound`` if it does not exist."""
        if index < 0:
            raise MalformedInput("leaf index must be non-negative")
        value = txn.get(_U64.pack(index), db=self._leaves)
        if value is None:
            raise NotFound(f"no leaf {index}")
        return bytes(value)

    def leaves(self, txn: ReadTxn, start: int, end: int) -> list[bytes]:
        """Return leaves ``start`` to ``end`` (exclusive) by one range scan.

        Raises ``MalformedInput`` unless ``0 <= start <= end`` and ``NotFound`` if ``end`` is
        beyond the tree.
        """
        if not 0 <= start <= end:
            raise MalformedInput("leaf range must satisfy 0 <= start <= end")
        if end > self.size(txn):
            raise NotFound(f"leaf range ends beyond the tree at {end}")
        if start == end:
            return []
        pairs = txn.scan(self._leaves, _U64.pack(start), _U64.pack(end))
        return [bytes(v) for _, v in islice(pairs, end - start)]

    def node(self, txn: ReadTxn, height: int, index: int) -> bytes:
        """Return the hash of the complete subtree of ``2**height`` leaves from ``index << height``.

        Raises ``NotFound`` if that subtree is not complete yet.
        """
        return _Reader(self, txn).get(height, index)

    def _check_size(self, txn: ReadTxn, size: int) -> None:
        if type(size) is not int or size < 0:
            raise MalformedInput("tree size must be non-negative")
        if size > self.size(txn):
            raise NotFound(f"tree size {size} is beyond the current tree")

    def fetch(self, txn: ReadTxn) -> proof.FetchNodes:
        """The ``saihm.translog.proof`` fetch over this tree as ``txn`` sees it.

        Each tile or node block is read at most once per returned callable; a node that is not
        stored raises ``NotFound``.
        """
        return _Reader(self, txn).fetch

    def root(self, txn: ReadTxn, size: int) -> bytes:
        """Return MTH of the first ``size`` leaves (RFC 9162 §2.1.1); ``EMPTY_ROOT`` for 0."""
        self._check_size(txn, size)
        return proof.root(size, self.fetch(txn))

    def inclusion_proof(self, txn: ReadTxn, index: int, size: int) -> list[bytes]:
        """Return PATH(index, D[0:size]) of RFC 9162 §2.1.3.1, leaf-side hash first.

        Raises ``MalformedInput`` unless ``0 <= index < size`` and ``NotFound`` if ``size`` is
        beyond the tree.
        """
        self._check_size(txn, size)
        return proof.inclusion_proof(index, size, self.fetch(txn))

    def consistency_proof(self, txn: ReadTxn, size1: int, size2: int) -> list[bytes]:
        """Return PROOF(size1, D[0:size2]) of RFC 9162 §2.1.4.1.

        Raises ``MalformedInput`` unless ``0 < size1 <= size2`` (the proof between equal sizes is
        empty) and ``NotFound`` if ``size2`` is beyond the tree.
        """
        self._check_size(txn, size2)
        return proof.consistency_proof(size1, size2, self.fetch(txn))

    def tile(self, txn: ReadTxn, level: int, index: int, width: int | None = None) -> bytes:
        """Return the byte-exact C2SP tile ``tile/<level>/<index>[.p/<width>]``.

        ``width=None`` asks for the full tile of 256 hashes. Raises ``MalformedInput`` for a
        width outside 1..255 and ``NotFound`` if the tree has not grown that far.
        """
        want = HASHES_PER_TILE if width is None else width
        if not 0 < want <= HASHES_PER_TILE or not 0 <= level <= 63 or index < 0:
            raise MalformedInput("tile level, index or width out of range")
        value = txn.get(_NODE_KEY.pack(level, index), db=self._tiles)
        if value is None or len(value) < want * HASH_SIZE:
            raise NotFound(f"no tile {level}/{index} of width {want}")
        return bytes(value[: want * HASH_SIZE])

    def entry_bundle(self, txn: ReadTxn, index: int, width: int | None = None) -> bytes:
        """Return the byte-exact entry bundle ``tile/entries/<index>[.p/<width>]``.

        Assembled from ``leaves`` by one range scan. Raises as ``tile`` does.
        """
        want = HASHES_PER_TILE if width is None else width
        if not 0 < want <= HASHES_PER_TILE or index < 0:
            raise MalformedInput("entry bundle index or width out of range")
        start = index * HASHES_PER_TILE
        return encode_entry_bundle(self.leaves(txn, start, start + want))

    # -- writes -------------------------------------------------------------------------------

    def append(self, txn: WriteTxn, leaves: Sequence[bytes]) -> int:
        """Append ``leaves`` inside the caller's write transaction; return the first new index.

        Writes the leaves, then the tiles and interior-node blocks that gained hashes. Raises
        ``TooLarge`` (before writing anything) for a leaf of 65,536 bytes or more.
        """
        if not leaves:
            return self.size(txn)
        for leaf in leaves:
            if len(leaf) > MAX_LEAF_SIZE:
                raise TooLarge("a log leaf must be under 65,536 bytes")
        first = self.size(txn)
        pack = _U64.pack
        items = [(pack(first + i), leaf) for i, leaf in enumerate(leaves)]
        txn.put_many(items, db=self._leaves, append=True)
        reader = _Reader(self, txn)
        blocks: dict[bytes, bytearray] = {}
        level = [sha256(b"\x00" + leaf).digest() for leaf in leaves]
        start, height = first, 0
        while level:
            tile_level, rel = divmod(height, TILE_HEIGHT)
            if rel == 0:
                self._write_tiles(txn, tile_level, start, level)
            else:
                self._write_block(txn, blocks, tile_level, rel, start, level)
            if start & 1:
                level = [reader.get(height, start - 1), *level]
                start -= 1
            it = iter(level)
            level = [
                sha256(b"\x01" + left + right).digest() for left, right in zip(it, it, strict=False)
            ]
            start >>= 1
            height += 1
        if blocks:
            txn.put_many([(key, bytes(value)) for key, value in blocks.items()], db=self._nodes)
        return first

    def _write_block(
        self,
        txn: WriteTxn,
        blocks: dict[bytes, bytearray],
        tile_level: int,
        rel: int,
        start: int,
        hashes: list[bytes],
    ) -> None:
        """Store hashes of height ``8 * tile_level + rel`` from index ``start`` in their blocks."""
        per_block = HASHES_PER_TILE >> rel
        end = start + len(hashes)
        pos = start
        while pos < end:
            block = pos // per_block
            stop = min(end, (block + 1) * per_block)
            key = _NODE_KEY.pack(tile_level, block)
            value = blocks.get(key)
            if value is None:
                stored = txn.get(key, db=self._nodes)
                value = bytearray(_BLOCK_SIZE) if stored is None else bytearray(stored)
                blocks[key] = value
            offset = _BLOCK_BASE[rel] + (pos - block * per_block) * HASH_SIZE
            value[offset : offset + (stop - pos) * HASH_SIZE] = b"".join(
                hashes[pos - start : stop - start]
            )
            pos = stop

    def _write_tiles(self, txn: WriteTxn, level: int, start: int, hashes: list[bytes]) -> None:
        """Extend the tiles at ``level`` with ``hashes`` of indices ``start`` onward."""
        data = b"".join(hashes)
        end = start + len(hashes)
        items: list[tuple[bytes, bytes]] = []
        pos = start
        while pos < end:
            tile = pos >> TILE_HEIGHT
            stop = min(end, (tile + 1) << TILE_HEIGHT)
            chunk = data[(pos - start) * HASH_SIZE : (stop - start) * HASH_SIZE]
            key = _NODE_KEY.pack(level, tile)
            if pos & _TILE_MASK:
                prefix = txn.get(key, db=self._tiles)
                if prefix is None or len(prefix) != (pos & _TILE_MASK) * HASH_SIZE:
                    raise VerificationFailed(f"tile {level}/{tile} does not match the tree size")
                chunk = bytes(prefix) + chunk
            items.append((key, chunk))
            pos = stop
        txn.put_many(items, db=self._tiles)


class _Reader:
    """Reads complete-subtree hashes within one transaction, caching each tile or block once.

    A node of height ``h = 8 * L + r`` lives in tile ``L`` (``r == 0``) or in the interior-node
    block ``L`` (``r`` in 1..7) of the tile covering its leaves.
    """

    __slots__ = ("_cache", "_nodes", "_tiles", "_txn")

    def __init__(self, storage: TreeStorage, txn: ReadTxn) -> None:
        self._txn = txn
        self._tiles = storage._tiles
        self._nodes = storage._nodes
        self._cache: dict[int, bytes | None] = {}

    def fetch(self, ids: Sequence[proof.NodeId]) -> list[bytes]:
        """The hashes of complete subtrees ``(height, index)``, in order (``proof.FetchNodes``)."""
        get = self.get
        return [get(height, index) for height, index in ids]

    def get(self, height: int, index: int) -> bytes:
        """Return one complete-subtree hash; raise ``NotFound`` if it is not stored."""
        level, rel = divmod(height, TILE_HEIGHT)
        if rel == 0:
            block = index >> TILE_HEIGHT
            offset = (index & _TILE_MASK) * HASH_SIZE
        else:
            block = (index << rel) >> TILE_HEIGHT
            offset = _BLOCK_BASE[rel] + (index - (block << (TILE_HEIGHT - rel))) * HASH_SIZE
        ckey = (block << 5) | (level << 1) | (rel and 1)  # an int: cheaper than a tuple key
        try:
            value = self._cache[ckey]
        except KeyError:
            db = self._nodes if rel else self._tiles
            value = self._txn.get(_NODE_KEY.pack(level, block), db=db)
            self._cache[ckey] = value
        if value is None or len(value) < offset + HASH_SIZE:
            raise NotFound(f"no node at height {height}, index {index}")
        out = value[offset : offset + HASH_SIZE]
        if rel and out == _ZERO_HASH:
            raise NotFound(f"no node at height {height}, index {index}")
        return out
