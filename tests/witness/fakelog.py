"""A log in memory for the witness tests: leaf hashes, notes signed with keys derived from
the origin, and consistency proofs from the reference tree (tests/translog/reftree.py)."""

from __future__ import annotations

import hashlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saihm.translog import Checkpoint, LogKeys, leaf_hash
from tests.translog.reftree import ref_root, ref_subproof


def log_keys(origin: str) -> LogKeys:
    """The log keys of ``origin``, the same on every call (seeded by the origin)."""
    seed = hashlib.sha256(origin.encode()).digest()
    return LogKeys(origin, Ed25519PrivateKey.from_private_bytes(seed), seed)


class FakeLog:
    """A log in memory: leaf hashes, signed notes, consistency proofs from the reference tree."""

    def __init__(self, keys: LogKeys, n: int = 0, tag: bytes = b"") -> None:
        self.keys = keys
        self.hashes = [leaf_hash(b"%s%d" % (tag, i)) for i in range(n)]
        self.stored: dict[int, bytes] = {}

    def grow(self, k: int, tag: bytes = b"") -> None:
        start = len(self.hashes)
        self.hashes += [leaf_hash(b"%s%d" % (tag, start + i)) for i in range(k)]

    def note(self, size: int | None = None) -> bytes:
        size = len(self.hashes) if size is None else size
        cp = Checkpoint(self.keys.origin, size, ref_root(self.hashes[:size]))
        return self.stored.setdefault(size, self.keys.sign(cp))

    def proof(self, old: int, new: int | None = None) -> list[bytes]:
        new = len(self.hashes) if new is None else new
        return ref_subproof(old, self.hashes[:new], True) if 0 < old < new else []

    # LogSource, for the submitter
    def latest_checkpoint(self) -> bytes:
        return self.note()

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        return self.proof(size1, size2)

    def add_cosignatures(self, size: int, lines) -> bytes:
        from saihm.translog.witness import append_cosignatures

        self.stored[size] = append_cosignatures(self.note(size), lines)
        return self.stored[size]
