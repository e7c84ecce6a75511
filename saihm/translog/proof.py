"""Roots and proofs of an RFC 6962 tree, built over a "fetch these nodes" callable.

This is the one place that knows which nodes a root or a proof is made of (Tessera's approach,
transparency-dev/merkle ``proof/proof.go``): compute the node coordinates first, fetch them in
one batch through a callable the caller supplies, then assemble. The callable is the only thing
that knows where nodes live: ``TreeStorage`` reads tiles and node blocks inside the caller's
transaction, ``MemoryTree`` reads lists in memory, ``TileNodes`` reads C2SP tiles from a
directory or over HTTP. Nothing here does I/O.

A node is ``(level, index)``: the perfect subtree of ``2**level`` leaves that starts at leaf
``index << level``. Only such complete subtrees are ever fetched. The one subtree of a proof
that is not perfect (the right edge of a tree whose size is not a power of two, Go's
"ephemeral" node) is folded here from the perfect subtrees that cover it (RFC 9162 §2.1.1).

The folds inline ``hashing.node_hash`` (``sha256(b"\x01" + left + right)``): a call per hash
costs more than hashing two 32-byte children, and tests/translog/test_proof.py checks every
result against the reference built with ``node_hash``.

Results equal RFC 9162's recursive definitions exactly: MTH (§2.1.1), PATH (§2.1.3.1) and
PROOF/SUBPROOF (§2.1.4.1), leaf-side hash first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from hashlib import sha256 as _sha256

from saihm.errors import MalformedInput, VerificationFailed, rejects
from saihm.translog.hashing import EMPTY_ROOT

__all__ = [
    "FetchNodes",
    "NodeId",
    "ProofNodes",
    "consistency_nodes",
    "consistency_proof",
    "inclusion_nodes",
    "inclusion_proof",
    "range_nodes",
    "root",
    "root_nodes",
]

#: ``(level, index)``: the perfect subtree of ``2**level`` leaves from leaf ``index << level``.
NodeId = tuple[int, int]
#: Returns the hash of every node asked for, in order; raises (``NotFound``) for one it lacks.
FetchNodes = Callable[[Sequence[NodeId]], Sequence[bytes]]

_MAX_SIZE = 1 << 64


@dataclass(frozen=True, slots=True)
class ProofNodes:
    """The nodes a proof is made of, and how to turn their hashes into the proof.

    ``ids[begin:end]`` (lowest level first) cover the proof's one imperfect subtree; their
    hashes fold into one proof hash. ``begin == end`` when there is nothing to fold.
    """

    ids: tuple[NodeId, ...]
    begin: int = 0
    end: int = 0

    @rejects()
    def rehash(self, hashes: Sequence[bytes]) -> list[bytes]:
        """The proof from the fetched ``hashes`` of ``ids`` (one per id, in order)."""
        if len(hashes) != len(self.ids):
            raise VerificationFailed(f"fetched {len(hashes)} node hashes, want {len(self.ids)}")
        if self.end - self.begin < 2:
            return list(hashes)
        folded = hashes[self.begin]
        for i in range(self.begin + 1, self.end):
            folded = _sha256(b"\x01" + hashes[i] + folded).digest()  # node_hash, inlined
        return [*hashes[: self.begin], folded, *hashes[self.end :]]


def _check_size(size: int, what: str = "tree size") -> None:
    if type(size) is not int or not 0 <= size < _MAX_SIZE:
        raise MalformedInput(f"{what} must be an integer in [0, 2**64)")


def range_nodes(begin: int, end: int) -> list[NodeId]:
    """The perfect subtrees that exactly cover leaves ``[begin, end)``, left to right.

    This is the compact range of ``[begin, end)`` (transparency-dev/merkle ``compact``): along
    the left border the levels rise, along the right border they fall. Raises
    ``MalformedInput`` unless ``0 <= begin <= end < 2**64``.
    """
    _check_size(begin, "begin")
    _check_size(end, "end")
    if begin > end:
        raise MalformedInput("a range needs begin <= end")
    return _range(begin, end)


def _range(begin: int, end: int) -> list[NodeId]:
    """``range_nodes`` for arguments already checked."""
    if begin == 0:
        left, right = 0, end
    else:
        # Below the point where the paths to leaves begin - 1 and end diverge, the zero bits of
        # begin - 1 are left-border subtrees and the one bits of end right-border subtrees.
        split = ((begin - 1) ^ end).bit_length() - 1
        mask = (1 << split) - 1
        left, right = ~(begin - 1) & mask, end & mask
    out: list[NodeId] = []
    pos = begin
    while left:
        level = (left & -left).bit_length() - 1
        out.append((level, pos >> level))
        pos += 1 << level
        left &= left - 1
    while right:
        level = right.bit_length() - 1
        out.append((level, pos >> level))
        pos += 1 << level
        right ^= 1 << level
    return out


def root_nodes(size: int) -> list[NodeId]:
    """The perfect subtrees whose hashes, folded from the right, give MTH(D[0:size])."""
    _check_size(size)
    return _range(0, size)


def _nodes(index: int, level: int, size: int, *, with_node: bool = True) -> ProofNodes:
    """The audit path of node ``(level, index)`` in the tree of ``size``, that node first
    (left out when ``with_node`` is False: an inclusion proof, or a consistency proof from a
    power of two, does not carry it).

    The path rises through the siblings of the node's ancestors up to the *fork*, where the
    paths to the node and to leaf ``size`` part; the fork's right sibling is the imperfect
    subtree, covered by the perfect subtrees of ``[end, size)``; the perfect subtrees of
    ``[0, begin)`` complete the path to the root (transparency-dev/merkle ``proof.nodes``).
    """
    inner = (index ^ (size >> level)).bit_length() - 1
    fork_level, fork_index = level + inner, index >> inner
    begin, end = fork_index << fork_level, (fork_index + 1) << fork_level
    ids: list[NodeId] = [(level, index)] if with_node else []
    ids.extend([(lv, (index >> (lv - level)) ^ 1) for lv in range(level, fork_level)])
    first = len(ids)
    ids.extend(reversed(_range(end, size)))
    last = len(ids)
    ids.extend(reversed(_range(0, begin)))
    if first >= last:
        first = last = 0
    return ProofNodes(tuple(ids), first, last)


def inclusion_nodes(index: int, size: int) -> ProofNodes:
    """The nodes of PATH(index, D[0:size]) (RFC 9162 §2.1.3.1).

    Raises ``MalformedInput`` unless ``0 <= index < size < 2**64``.
    """
    _check_size(size)
    if type(index) is not int or not 0 <= index < size:
        raise MalformedInput(f"leaf index {index} is not below tree size {size}")
    return _nodes(index, 0, size, with_node=False)


def consistency_nodes(size1: int, size2: int) -> ProofNodes:
    """The nodes of PROOF(size1, D[0:size2]) (RFC 9162 §2.1.4.1); none when the sizes are equal.

    The proof starts from the largest perfect subtree that ends at ``size1`` (left out when
    ``size1`` is a power of two: the verifier knows it as the old root) and continues with the
    audit path of that subtree in the tree of ``size2``. Raises ``MalformedInput`` unless
    ``0 < size1 <= size2 < 2**64``.
    """
    _check_size(size1, "size1")
    _check_size(size2, "size2")
    if not 0 < size1 <= size2:
        raise MalformedInput("consistency proof needs 0 < size1 <= size2")
    if size1 == size2:
        return ProofNodes(())
    level = (size1 & -size1).bit_length() - 1
    index = (size1 - 1) >> level
    return _nodes(index, level, size2, with_node=index != 0)


def _fetch(fetch: FetchNodes, ids: Sequence[NodeId]) -> Sequence[bytes]:
    """``fetch(ids)``, checked to be one hash per id; ``fetch``'s own SaihmError passes."""
    if not ids:
        return []
    try:
        hashes = fetch(ids)
        count = len(hashes)
    except TypeError as err:
        raise MalformedInput("fetch is not a callable returning a sequence of hashes") from err
    if count != len(ids):
        raise VerificationFailed(f"fetched {count} node hashes, want {len(ids)}")
    return hashes


def root(size: int, fetch: FetchNodes) -> bytes:
    """MTH(D[0:size]) (RFC 9162 §2.1.1) from the nodes of ``root_nodes(size)``.

    ``EMPTY_ROOT`` for 0. Raises ``MalformedInput`` for a size outside [0, 2**64) and whatever
    ``fetch`` raises for a node it does not hold.
    """
    hashes = _fetch(fetch, root_nodes(size))
    if not hashes:
        return EMPTY_ROOT
    acc = hashes[-1]
    try:
        for left in reversed(hashes[:-1]):
            acc = _sha256(b"\x01" + left + acc).digest()  # node_hash, inlined (module docstring)
    except TypeError as err:
        raise VerificationFailed("a fetched node hash is not bytes") from err
    return bytes(acc)


@rejects()
def inclusion_proof(index: int, size: int, fetch: FetchNodes) -> list[bytes]:
    """PATH(index, D[0:size]) (RFC 9162 §2.1.3.1), leaf-side hash first; see ``inclusion_nodes``."""
    nodes = inclusion_nodes(index, size)
    return nodes.rehash(_fetch(fetch, nodes.ids))


@rejects()
def consistency_proof(size1: int, size2: int, fetch: FetchNodes) -> list[bytes]:
    """PROOF(size1, D[0:size2]) (RFC 9162 §2.1.4.1); see ``consistency_nodes``."""
    nodes = consistency_nodes(size1, size2)
    return nodes.rehash(_fetch(fetch, nodes.ids))
