"""saihm.translog: the RFC 6962 transparency log, its tiles, proofs and signed checkpoints.

``verify`` is pure and imports nothing of saihm; the rest imports only the shared leaves.
"""

from saihm.translog.checkpoint import Checkpoint, LogKeys, verify_checkpoint
from saihm.translog.hashing import EMPTY_ROOT, leaf_hash, node_hash
from saihm.translog.memory import MemoryTree
from saihm.translog.note import NoteError
from saihm.translog.storage import TreeStorage
from saihm.translog.tree import MerkleTree
from saihm.translog.verify import (
    ProofError,
    RootMismatchError,
    root_from_inclusion,
    verify_consistency,
    verify_inclusion,
)

__all__ = [
    "EMPTY_ROOT",
    "Checkpoint",
    "LogKeys",
    "MemoryTree",
    "MerkleTree",
    "NoteError",
    "ProofError",
    "RootMismatchError",
    "TreeStorage",
    "leaf_hash",
    "node_hash",
    "root_from_inclusion",
    "verify_checkpoint",
    "verify_consistency",
    "verify_inclusion",
]
