"""RFC 6962 / RFC 9162 Merkle tree hashing with SHA-256 (RFC 9162 §2.1.1).

The leaf and interior-node hashes are domain-separated by a one-byte prefix so that a leaf can
never be passed off as an interior node (second-preimage resistance, RFC 9162 §2.1.1).
"""

from __future__ import annotations

import hashlib

from saihm.errors import MalformedInput

__all__ = ["EMPTY_ROOT", "HASH_SIZE", "leaf_hash", "node_hash"]

HASH_SIZE = 32

#: The root of the empty tree, MTH({}) = SHA-256() (RFC 9162 §2.1.1).
EMPTY_ROOT = hashlib.sha256(b"").digest()

_sha256 = hashlib.sha256


def leaf_hash(data: bytes) -> bytes:
    """MTH({d}) = SHA-256(0x00 || d), a leaf's hash; ``MalformedInput`` for non-bytes."""
    try:
        return _sha256(b"\x00" + data).digest()
    except TypeError as err:
        raise MalformedInput("a leaf is bytes") from err


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right): the hash of an interior node from its two children.

    Raises ``MalformedInput`` unless both are bytes-like.
    """
    try:
        return _sha256(b"\x01" + left + right).digest()
    except TypeError as err:
        raise MalformedInput("node hashes are bytes") from err
