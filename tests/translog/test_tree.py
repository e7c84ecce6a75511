"""MerkleTree and TreeStorage against a naive reference tree, pymerkle and mutated proofs."""

from __future__ import annotations

import multiprocessing
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymerkle import InmemoryTree

from saihm.errors import MalformedInput, NotFound, TooLarge
from saihm.translog import (
    MerkleTree,
    ProofError,
    RootMismatchError,
    verify_consistency,
    verify_inclusion,
)
from saihm.translog.tiles import decode_entry_bundle
from tests.translog.reftree import hashes_for, leaves_for, ref_path, ref_root, ref_subproof

N = 64


@pytest.fixture(scope="module")
def tree64():
    leaves = leaves_for(N)
    with tempfile.TemporaryDirectory() as d, MerkleTree(d) as tree:
        pos = 0
        for step in (1, 2, 3, 5, 8, 13, 32):
            tree.append_many(leaves[pos : pos + step])
            pos += step
        yield tree, hashes_for(leaves)


def test_every_root_equals_the_reference(tree64) -> None:
    tree, hashes = tree64
    assert tree.size == N
    for size in range(N + 1):
        assert tree.root(size) == ref_root(hashes[:size])


def test_every_inclusion_proof_equals_rfc_path_and_verifies(tree64) -> None:
    tree, hashes = tree64
    for size in range(1, N + 1):
        root = ref_root(hashes[:size])
        for index in range(size):
            proof = tree.inclusion_proof(index, size)
            assert proof == ref_path(index, hashes[:size])
            verify_inclusion(hashes[index], index, size, proof, root)


def test_every_consistency_proof_equals_rfc_subproof_and_verifies(tree64) -> None:
    tree, hashes = tree64
    for size2 in range(1, N + 1):
        for size1 in range(1, size2 + 1):
            proof = tree.consistency_proof(size1, size2)
            assert proof == ref_subproof(size1, hashes[:size2], True)
            verify_consistency(
                size1, size2, proof, ref_root(hashes[:size1]), ref_root(hashes[:size2])
            )


def _mutations(proof: list[bytes]):
    for i, h in enumerate(proof):
        for j in range(len(h)):
            yield [*proof[:i], h[:j] + bytes([h[j] ^ 1]) + h[j + 1 :], *proof[i + 1 :]]
    if proof:
        yield proof[:-1]
    yield [*proof, proof[0] if proof else bytes(32)]
    yield [bytes(32), *proof]


def test_tampered_inclusion_proofs_are_rejected(tree64) -> None:
    tree, hashes = tree64
    for index, size in ((0, 1), (5, 13), (12, 13), (31, 64), (40, 61)):
        proof, root = tree.inclusion_proof(index, size), ref_root(hashes[:size])
        for bad in _mutations(proof):
            with pytest.raises(ProofError):
                verify_inclusion(hashes[index], index, size, bad, root)
        for i, s in ((index + 1, size), (index - 1, size), (index, size * 2), (index, size // 2)):
            if (i, s) != (index, size) and i >= 0:
                with pytest.raises(ProofError):
                    verify_inclusion(hashes[index], i, s, proof, root)
        with pytest.raises(ProofError):
            verify_inclusion(hashes[index], index, size, proof, root[:31])


def test_tampered_consistency_proofs_are_rejected(tree64) -> None:
    tree, hashes = tree64
    for size1, size2 in ((1, 2), (3, 7), (4, 8), (6, 64), (17, 61)):
        proof = tree.consistency_proof(size1, size2)
        r1, r2 = ref_root(hashes[:size1]), ref_root(hashes[:size2])
        for bad in _mutations(proof):
            with pytest.raises(ProofError):
                verify_consistency(size1, size2, bad, r1, r2)
        with pytest.raises(ProofError):
            verify_consistency(size1, size2, proof, r2, r1)
        for s1, s2 in (
            (size1 + 1, size2),
            (size1 - 1, size2),
            (size1, size2 * 2),
            (size1, size2 // 2),
        ):
            with pytest.raises(ProofError):
                verify_consistency(s1, s2, proof, r1, r2)


def test_mismatch_error_carries_expected_and_calculated_roots(tree64) -> None:
    tree, hashes = tree64
    with pytest.raises(RootMismatchError) as info:
        verify_inclusion(hashes[3], 3, 10, tree.inclusion_proof(3, 10), bytes(32))
    assert info.value.expected == bytes(32)
    assert info.value.calculated == ref_root(hashes[:10])


def test_out_of_range_requests_raise(tree64) -> None:
    tree, _ = tree64
    with pytest.raises((NotFound, MalformedInput)):
        tree.root(N + 1)
    with pytest.raises(MalformedInput):
        tree.inclusion_proof(5, 5)
    with pytest.raises(MalformedInput):
        tree.consistency_proof(0, 5)
    with pytest.raises(NotFound):
        tree.tile(0, 0)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=40), min_size=1, max_size=40), min_size=1, max_size=8))
def test_roots_and_proofs_equal_pymerkle_rfc6962(batches) -> None:
    leaves = [x for b in batches for x in b]
    ref = InmemoryTree(disable_security=False)  # 0x00 / 0x01 prefixes: RFC 6962 hashing.
    ref.append_entries(leaves)
    with tempfile.TemporaryDirectory() as d, MerkleTree(d) as tree:
        for b in batches:
            tree.append_many(b)
        n = len(leaves)
        for size in range(1, n + 1, max(1, n // 7)):
            assert tree.root(size) == ref.get_root(size)
            for index in range(0, size, max(1, size // 5)):
                # pymerkle's path starts with the leaf itself; the RFC proof is the rest.
                assert (
                    tree.inclusion_proof(index, size)
                    == ref.prove_inclusion(index + 1, size).path[1:]
                )


def test_tiles_and_entry_bundles_are_byte_exact() -> None:
    leaves = leaves_for(70_000 // 100)  # 700 leaves: two full level-0 tiles and a partial one.
    hashes = hashes_for(leaves)
    with tempfile.TemporaryDirectory() as d, MerkleTree(d) as tree:
        tree.append_many(leaves[:300])
        tree.append_many(leaves[300:])
        assert tree.tile(0, 1) == b"".join(hashes[256:512])
        assert tree.tile(0, 2, 188) == b"".join(hashes[512:700])
        assert tree.tile(0, 2, 10) == b"".join(hashes[512:522])
        with pytest.raises(NotFound):
            tree.tile(0, 2, 189)
        assert tree.tile(1, 0, 2) == ref_root(hashes[:256]) + ref_root(hashes[256:512])
        assert decode_entry_bundle(tree.entry_bundle(1)) == leaves[256:512]
        assert decode_entry_bundle(tree.entry_bundle(2, 5)) == leaves[512:517]
        assert (
            tree.entry_bundle(0, 2) == b"\x00\x00" + len(leaves[1]).to_bytes(2, "big") + leaves[1]
        )


def test_a_leaf_of_65536_bytes_is_refused_and_nothing_is_written() -> None:
    with tempfile.TemporaryDirectory() as d, MerkleTree(d) as tree:
        with pytest.raises(TooLarge):
            tree.append_many([b"ok", bytes(65_536)])
        assert tree.size == 0
        assert tree.append(bytes(65_535)) == 0


def _append_worker(path: str, tag: int, count: int) -> None:
    with MerkleTree(path) as tree:
        for i in range(count):
            tree.append_many([f"{tag}:{i}:{j}".encode() for j in range(3)])


def test_two_processes_appending_to_one_directory() -> None:
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as d:
        workers = [ctx.Process(target=_append_worker, args=(d, t, 40)) for t in (1, 2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert [w.exitcode for w in workers] == [0, 0]
        with MerkleTree(d) as tree:
            leaves = tree.leaves(0, tree.size)
            want = {f"{t}:{i}:{j}".encode() for t in (1, 2) for i in range(40) for j in range(3)}
            assert len(leaves) == 240 and set(leaves) == want
            hashes = hashes_for(leaves)
            assert tree.root() == ref_root(hashes)
            for index in range(0, 240, 17):
                verify_inclusion(
                    hashes[index], index, 240, tree.inclusion_proof(index), tree.root()
                )
