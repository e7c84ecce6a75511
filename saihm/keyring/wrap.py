"""KEK wrapping of DEKs and holder seeds: AES-256 key wrap, RFC 3394 (no padding).

A 32-byte key wraps to 40 bytes. The wrap is deterministic for one (KEK, key) pair and carries
RFC 3394's 64-bit integrity check, so a wrong KEK or an altered value fails to unwrap.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.keywrap import (
    InvalidUnwrap,
    aes_key_unwrap,
    aes_key_wrap,
)

from saihm.keyring.errors import UnwrapError

__all__ = ["KEK_BYTES", "unwrap", "wrap"]

KEK_BYTES = 32


def wrap(kek: bytes, key: bytes) -> bytes:
    """RFC 3394 AES key wrap of ``key`` (16..n bytes, a multiple of 8) under a 32-byte KEK."""
    if len(kek) != KEK_BYTES:
        raise ValueError("a KEK is 32 bytes")
    return aes_key_wrap(kek, key)


def unwrap(kek: bytes, wrapped: bytes) -> bytes:
    """Inverse of ``wrap``; raises ``UnwrapError`` when the integrity check fails."""
    if len(kek) != KEK_BYTES:
        raise ValueError("a KEK is 32 bytes")
    try:
        return aes_key_unwrap(kek, wrapped)
    except (InvalidUnwrap, ValueError) as err:
        raise UnwrapError("wrapped key does not unwrap under this KEK") from err
