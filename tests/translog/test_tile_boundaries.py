"""Roots and proofs across tile boundaries equal the naive RFC 9162 reference.

The exhaustive tests in test_tree.py stay inside one level-0 tile. Here the tree grows past
256 and 65,536 leaves in uneven batches, so proofs read level-1 and level-2 tiles and the
interior-node blocks under them (heights 9..15 and 17..), and right edges cut tiles short.
"""

from __future__ import annotations

import random
import tempfile

import pytest

from saihm.translog import MerkleTree, verify_consistency, verify_inclusion
from tests.translog.reftree import hashes_for, ref_path, ref_root, ref_subproof

N = 70_000
SIZES = [255, 256, 257, 511, 512, 513, 65_535, 65_536, 65_537, 65_792, N]


@pytest.fixture(scope="module")
def grown():
    leaves = [i.to_bytes(4, "big") for i in range(N)]
    rng = random.Random(6962)
    with tempfile.TemporaryDirectory() as d, MerkleTree(d) as tree:
        pos = 0
        while pos < N:
            step = rng.choice((1, 7, 255, 256, 257, 4096))
            tree.append_many(leaves[pos : pos + step])
            pos += step
        yield tree, hashes_for(leaves)


@pytest.mark.parametrize("size", SIZES)
def test_root_and_proofs_at_a_tile_boundary_equal_the_reference(grown, size: int) -> None:
    tree, hashes = grown
    rng = random.Random(size)
    root = ref_root(hashes[:size])
    assert tree.root(size) == root
    for index in {0, size - 1, rng.randrange(size)}:
        proof = tree.inclusion_proof(index, size)
        assert proof == ref_path(index, hashes[:size])
        verify_inclusion(hashes[index], index, size, proof, root)
    for size1 in {1, size, rng.randint(1, size), *(s for s in SIZES if s < size)}:
        proof = tree.consistency_proof(size1, size)
        assert proof == ref_subproof(size1, hashes[:size], True)
        verify_consistency(size1, size, proof, ref_root(hashes[:size1]), root)
