"""Holder identity and the authority key (saihm-protocol "Identity binding (ML-DSA-65)").

identityKey = HKDF-SHA-256(salt="MPS-PQC-KEY-GEN-v1", IKM=holderSeed,
info="MPS-AGENT-IDENTITY-v1", L=64); its first 32 bytes are the ML-DSA-65 key-generation seed
xi, the rest are reserved; holderId = SHA-256(public key). Private keys and seeds never appear
in a repr, an exception or a log line.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import NoReturn, Self

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from saihm.errors import MalformedInput, rejects
from saihm.mldsa import (
    MLDSA65PrivateKey,
    mldsa65_from_seed,
    mldsa65_public_bytes,
    mldsa65_sign,
    mldsa65_sign_all,
)

__all__ = [
    "IDENTITY_INFO",
    "IDENTITY_SALT",
    "AuthorityKey",
    "HolderKey",
    "derive_identity_key",
    "holder_id_of",
]

IDENTITY_SALT = b"MPS-PQC-KEY-GEN-v1"
IDENTITY_INFO = b"MPS-AGENT-IDENTITY-v1"
MIN_SEED_BYTES = 32


@rejects()
def derive_identity_key(seed: bytes) -> bytes:
    """The 64-byte identityKey of a holder seed of at least 256 bits.

    Raises ``MalformedInput`` for a shorter seed.
    """
    if not isinstance(seed, bytes) or len(seed) < MIN_SEED_BYTES:
        raise MalformedInput("a holder seed is at least 32 bytes")
    return HKDF(
        algorithm=hashes.SHA256(), length=64, salt=IDENTITY_SALT, info=IDENTITY_INFO
    ).derive(seed)


@rejects()
def holder_id_of(public_key: bytes) -> bytes:
    """holderId: SHA-256 of the 1952-byte ML-DSA-65 public key."""
    return hashlib.sha256(public_key).digest()


class _SigningKey:
    """An ML-DSA-65 private key with its public key; signs hedged (randomised)."""

    __slots__ = ("_key", "holder_id", "public_key")

    def __init__(self, key: MLDSA65PrivateKey) -> None:
        self._key = key
        self.public_key: bytes = mldsa65_public_bytes(key)
        self.holder_id: bytes = holder_id_of(self.public_key)

    @rejects()
    def sign(self, message: bytes, context: bytes) -> bytes:
        """Hedged pure ML-DSA-65 signature of ``message`` with ``context`` (3309 bytes)."""
        return mldsa65_sign(self._key, message, context)

    @rejects()
    def sign_all(self, items: Sequence[tuple[bytes, bytes]]) -> list[bytes]:
        """:meth:`sign` of each ``(message, context)``, made at once (``mldsa65_sign_all``)."""
        return mldsa65_sign_all(self._key, items)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(holder_id={self.holder_id.hex()[:16]}…, <private>)"

    def __reduce__(self) -> NoReturn:  # never pickle a private key by accident
        raise TypeError(f"{type(self).__name__} cannot be pickled")


class HolderKey(_SigningKey):
    """A holder's identity key pair, derived from the holder seed."""

    __slots__ = ()

    @classmethod
    @rejects()
    def from_seed(cls, seed: bytes) -> Self:
        """Derive the key pair from a holder seed (>= 32 bytes); raises ``MalformedInput``."""
        return cls(mldsa65_from_seed(derive_identity_key(seed)[:32]))


class AuthorityKey(_SigningKey):
    """The capability authority's ML-DSA-65 key (DESIGN.md "Capabilities").

    Its 32-byte seed is the ML-DSA-65 xi directly; ``holder_id`` is the SHA-256 of its public key
    and names the authority, not a holder.
    """

    __slots__ = ("_seed",)

    def __init__(self, key: MLDSA65PrivateKey, seed: bytes) -> None:
        super().__init__(key)
        self._seed = seed

    @classmethod
    @rejects()
    def from_seed(cls, seed: bytes) -> Self:
        """The authority key for a 32-byte seed; raises ``MalformedInput`` for another length."""
        if not isinstance(seed, bytes) or len(seed) != 32:
            raise MalformedInput("an authority seed is 32 bytes")
        return cls(mldsa65_from_seed(seed), seed)

    @classmethod
    def generate(cls) -> Self:
        """A fresh authority key from 32 bytes of ``os.urandom``."""
        return cls.from_seed(os.urandom(32))

    def seed_bytes(self) -> bytes:
        """The 32-byte seed, for the authority to store in its own key directory."""
        return self._seed
