"""Roots and proofs over a live log's HTTP tiles: ``saihm.translog.proof`` with ``tile_nodes``.

The log is the audit template grown past two full tiles (conftest.py ``big``), served by the
real app on 127.0.0.1. Every root and proof built from the tiles alone must equal the one the
operator computes from its own storage (``/log/v1/proof/...``) and verify against signed roots.
"""

from __future__ import annotations

import asyncio

import pytest

from saihm.audit.fetch import FetchError, HttpSource, Source, tile_nodes, tile_reader
from saihm.errors import MalformedInput, NotFound
from saihm.translog import leaf_hash, proof, verify_consistency, verify_inclusion

from .conftest import World
from .helpers import serving


def _over_http(url: str, size: int, sizes: list[int]) -> dict:
    source = HttpSource(url)
    nodes = tile_nodes(source, size)
    out: dict = {"roots": {n: proof.root(n, nodes) for n in sizes}}
    out["inclusion"] = {
        (i, n): proof.inclusion_proof(i, n, nodes) for n in sizes for i in (0, n // 2, n - 1)
    }
    out["consistency"] = {
        (m, n): proof.consistency_proof(m, n, nodes) for n in sizes for m in (1, n // 3 or 1, n)
    }
    return out


async def test_proofs_over_http_tiles_equal_the_operators_and_verify(big: World) -> None:
    async with serving(big) as (op, url):
        size = op.store.size()
        assert size > 512
        sizes = sorted({1, 255, 256, 257, 511, 512, size - 1, size})
        got = await asyncio.to_thread(_over_http, url, size, sizes)
        for n in sizes:
            assert got["roots"][n] == op.store.root(n)
        for (i, n), path in got["inclusion"].items():
            assert path == op.store.inclusion_proof(i, n)
            verify_inclusion(leaf_hash(op.store.leaves(i, i + 1)[0]), i, n, path, op.store.root(n))
        for (m, n), path in got["consistency"].items():
            assert path == op.store.consistency_proof(m, n)
            verify_consistency(m, n, path, op.store.root(m), op.store.root(n))


class _Tiles(Source):
    """A source of given tile bodies, recording what is asked for."""

    def __init__(self, tiles: dict[str, bytes]) -> None:
        self.tiles, self.asked, self.name = tiles, [], "test"

    def get(self, path: str) -> bytes | None:
        self.asked.append(path)
        return self.tiles.get(path)


def test_the_tile_reader_asks_for_the_full_and_partial_tiles_of_the_size() -> None:
    source = _Tiles({"tile/0/000": bytes(32 * 256), "tile/0/001.p/4": bytes(32 * 4)})
    read = tile_reader(source, 260)
    assert read(0, 0) == bytes(32 * 256)
    assert read(0, 1) == bytes(32 * 4)
    assert read(0, 2) is None and read(2, 0) is None  # beyond the tree: nothing fetched
    assert source.asked == ["tile/0/000", "tile/0/001.p/4"]
    assert read(1, 0) is None and source.asked[-1] == "tile/1/000.p/1"


def test_a_tile_of_the_wrong_length_is_a_fetch_error_not_a_root() -> None:
    source = _Tiles({"tile/0/000.p/3": bytes(32 * 4)})
    with pytest.raises(FetchError):
        proof.root(3, tile_nodes(source, 3))
    with pytest.raises(NotFound):
        proof.root(3, tile_nodes(_Tiles({}), 3))
    with pytest.raises(MalformedInput):
        tile_reader(source, -1)
