"""Pure verification of RFC 9162 inclusion and consistency proofs (RFC 9162 §2.1.3.2, §2.1.4.2).

This module imports nothing of saihm but ``saihm.errors`` (a leaf that imports nothing of saihm,
for the one error root), and nothing outside the standard library, so that a third party can read
it, copy it with ``errors.py``, and check proofs from the public log alone (DESIGN.md "Layers").

Verification raises and never returns a bool. Preconditions are checked before any hashing:
sizes, hash lengths (every hash is 32 bytes, roots included, even where two roots are merely
compared), and the exact proof length the tree shape allows. Only then is the root calculated.

The calculation follows the shape of the proof rather than the loop of RFC 9162: the audit path
of leaf ``index`` in a tree of ``size`` leaves splits into an *inner* part, the levels below the
point where the paths to ``index`` and to ``size - 1`` diverge (each sibling is on the left or the
right as the bits of ``index`` say), and a *border* part along the right edge of the tree, whose
siblings are all on the left. The two parts have ``bit_length(index ^ (size - 1))`` and
``popcount(index >> inner)`` hashes. This is equivalent to the RFC's algorithm, and it lets the
expected proof length be checked before anything is hashed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from saihm.errors import VerificationFailed, rejects

__all__ = [
    "ProofError",
    "RootMismatchError",
    "root_from_inclusion",
    "verify_consistency",
    "verify_inclusion",
]

_HASH_SIZE = 32
_MAX_SIZE = 1 << 64


class ProofError(VerificationFailed):
    """A proof that does not verify, or arguments under which no proof could verify.

    A ``VerificationFailed``, so ``except SaihmError`` covers it (the one error root).
    """


class RootMismatchError(ProofError):
    """A well-formed proof whose calculated root differs from the expected root."""

    def __init__(self, expected: bytes, calculated: bytes) -> None:
        super().__init__(
            f"calculated root {calculated.hex()} does not match expected root {expected.hex()}"
        )
        self.expected = expected
        self.calculated = calculated


def _node_hash(left: bytes, right: bytes) -> bytes:
    # The same function as saihm.translog.hashing.node_hash, written out again so that this
    # module stands alone (RFC 9162 §2.1.1: SHA-256(0x01 || left || right)).
    return hashlib.sha256(b"\x01" + left + right).digest()


def _check_count(value: int, what: str) -> None:
    if type(value) is not int or not 0 <= value < _MAX_SIZE:
        raise ProofError(f"{what} must be an integer in [0, 2**64)")


def _check_hash(value: bytes, what: str) -> None:
    if type(value) is not bytes or len(value) != _HASH_SIZE:
        raise ProofError(f"{what} is not a {_HASH_SIZE}-byte hash")


def _check_proof(proof: Sequence[bytes]) -> None:
    for i, item in enumerate(proof):
        _check_hash(item, f"proof[{i}]")


def _shape(index: int, size: int) -> tuple[int, int]:
    """(inner, border): hash counts of the audit path of leaf ``index`` in a tree of ``size``."""
    inner = (index ^ (size - 1)).bit_length()
    border = (index >> inner).bit_count()
    return inner, border


@rejects(ProofError)
def root_from_inclusion(leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes:
    """The root that ``proof`` gives for ``leaf_hash`` at ``index`` in a tree of ``size`` leaves.

    RFC 9162 §2.1.3.2. ``leaf_hash`` is MTH of the leaf, SHA-256(0x00 || data). Raises
    ``ProofError`` if ``index >= size``, a hash is not 32 bytes, or the proof has the wrong
    number of hashes for that index and size.
    """
    _check_count(index, "index")
    _check_count(size, "size")
    if index >= size:
        raise ProofError(f"index {index} is not below tree size {size}")
    _check_hash(leaf_hash, "leaf hash")
    _check_proof(proof)
    inner, border = _shape(index, size)
    if len(proof) != inner + border:
        raise ProofError(f"inclusion proof has {len(proof)} hashes, want {inner + border}")
    calculated = leaf_hash
    for level, sibling in enumerate(proof[:inner]):
        if (index >> level) & 1:
            calculated = _node_hash(sibling, calculated)
        else:
            calculated = _node_hash(calculated, sibling)
    for sibling in proof[inner:]:
        calculated = _node_hash(sibling, calculated)
    return calculated


@rejects(ProofError)
def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``proof`` places ``leaf_hash`` at ``index`` in the tree of ``size`` with ``root``.

    RFC 9162 §2.1.3.2. Raises ``ProofError`` (``RootMismatchError`` when only the root differs).
    """
    _check_hash(root, "root")
    calculated = root_from_inclusion(leaf_hash, index, size, proof)
    if calculated != root:
        raise RootMismatchError(root, calculated)


@rejects(ProofError)
def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Check that the tree of ``size2`` with ``root2`` extends the tree of ``size1`` with ``root1``.

    RFC 9162 §2.1.4.2. ``size1`` must be at least 1 (a proof from the empty tree is not defined)
    and at most ``size2``. Equal sizes need an empty proof and equal roots. Raises ``ProofError``
    (``RootMismatchError`` when the proof is well formed but a root differs).
    """
    _check_count(size1, "size1")
    _check_count(size2, "size2")
    if size1 > size2:
        raise ProofError(f"size1 {size1} is greater than size2 {size2}")
    if size1 == 0:
        raise ProofError("a consistency proof from the empty tree is not defined")
    _check_hash(root1, "root1")
    _check_hash(root2, "root2")
    _check_proof(proof)
    if size1 == size2:
        if proof:
            raise ProofError("equal sizes need an empty consistency proof")
        if root1 != root2:
            raise RootMismatchError(root1, root2)
        return
    if not proof:
        raise ProofError("different sizes need a non-empty consistency proof")

    # The old tree's last leaf is size1 - 1. Below level `shift` (the trailing zero bits of
    # size1) the old tree ends in a perfect subtree that is also a node of the new tree; the
    # proof starts from that node's hash. When size1 is itself a power of two that node is the
    # old root, and the proof leaves it out (RFC 9162 §2.1.4.1).
    inner, border = _shape(size1 - 1, size2)
    shift = (size1 & -size1).bit_length() - 1
    inner -= shift
    if size1 == 1 << shift:
        seed, path = root1, proof
    else:
        seed, path = proof[0], proof[1:]
    if len(path) != inner + border:
        want = inner + border + len(proof) - len(path)
        raise ProofError(f"consistency proof has {len(proof)} hashes, want {want}")

    # Both roots are chained from the seed along the audit path of leaf size1 - 1 above level
    # `shift`. The old root takes only the siblings on the left; the new root takes them all.
    index = (size1 - 1) >> shift
    old, new = seed, seed
    for level, sibling in enumerate(path[:inner]):
        if (index >> level) & 1:
            old = _node_hash(sibling, old)
            new = _node_hash(sibling, new)
        else:
            new = _node_hash(new, sibling)
    for sibling in path[inner:]:
        old = _node_hash(sibling, old)
        new = _node_hash(sibling, new)
    if old != root1:
        raise RootMismatchError(root1, old)
    if new != root2:
        raise RootMismatchError(root2, new)
