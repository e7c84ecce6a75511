"""A naive RFC 9162 reference tree and the vectors directory, for the translog tests."""

from __future__ import annotations

from pathlib import Path

from saihm.translog import EMPTY_ROOT, leaf_hash, node_hash


def vectors_dir() -> Path:
    """``tests/vectors``: the public vectors copied into the repository (see its README)."""
    return Path(__file__).parents[1] / "vectors"


def ref_root(hashes: list[bytes]) -> bytes:
    """MTH of RFC 9162 §2.1.1, computed recursively from leaf hashes."""
    if not hashes:
        return EMPTY_ROOT
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return node_hash(ref_root(hashes[:k]), ref_root(hashes[k:]))


def ref_path(m: int, hashes: list[bytes]) -> list[bytes]:
    """PATH(m, D[n]) of RFC 9162 §2.1.3.1, recursively."""
    if len(hashes) <= 1:
        return []
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    if m < k:
        return [*ref_path(m, hashes[:k]), ref_root(hashes[k:])]
    return [*ref_path(m - k, hashes[k:]), ref_root(hashes[:k])]


def ref_subproof(m: int, hashes: list[bytes], whole: bool) -> list[bytes]:
    """SUBPROOF(m, D[n], b) of RFC 9162 §2.1.4.1, recursively."""
    n = len(hashes)
    if m == n:
        return [] if whole else [ref_root(hashes)]
    k = 1 << ((n - 1).bit_length() - 1)
    if m <= k:
        return [*ref_subproof(m, hashes[:k], whole), ref_root(hashes[k:])]
    return [*ref_subproof(m - k, hashes[k:], False), ref_root(hashes[:k])]


def leaves_for(n: int) -> list[bytes]:
    return [f"leaf {i}".encode() * (i % 3) for i in range(n)]


def hashes_for(leaves: list[bytes]) -> list[bytes]:
    return [leaf_hash(x) for x in leaves]
