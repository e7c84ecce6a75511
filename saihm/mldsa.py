"""Every ML-DSA call saihm makes, in one module (the ML-DSA API of ``cryptography`` is young).

Signing is hedged (randomised), as FIPS 204 recommends for production; verification raises
``InvalidSignature`` and never returns a bool. ``cryptography`` releases the GIL while it signs,
so :func:`mldsa65_sign_all` signs several messages at once on a few shared threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.mldsa import (
    MLDSA44PrivateKey,
    MLDSA44PublicKey,
    MLDSA65PrivateKey,
    MLDSA65PublicKey,
)

__all__ = [
    "MLDSA44_PUBLIC_KEY_SIZE",
    "MLDSA44_SIGNATURE_SIZE",
    "MLDSA65_PUBLIC_KEY_SIZE",
    "MLDSA65_SIGNATURE_SIZE",
    "InvalidSignature",
    "MLDSA44PrivateKey",
    "MLDSA65PrivateKey",
    "mldsa44_from_seed",
    "mldsa44_public_bytes",
    "mldsa44_verify",
    "mldsa65_from_seed",
    "mldsa65_public_bytes",
    "mldsa65_sign",
    "mldsa65_sign_all",
    "mldsa65_verify",
]

MLDSA65_PUBLIC_KEY_SIZE = 1952
MLDSA65_SIGNATURE_SIZE = 3309
MLDSA44_PUBLIC_KEY_SIZE = 1312
MLDSA44_SIGNATURE_SIZE = 2420


def mldsa65_from_seed(xi: bytes) -> MLDSA65PrivateKey:
    """ML-DSA.KeyGen_internal from the 32-byte seed xi (FIPS 204 Algorithm 6)."""
    if len(xi) != 32:
        raise ValueError("ML-DSA seed must be 32 bytes")
    return MLDSA65PrivateKey.from_seed_bytes(xi)


def mldsa65_public_bytes(key: MLDSA65PrivateKey) -> bytes:
    """The raw 1952-byte encoded public key."""
    return key.public_key().public_bytes_raw()


def mldsa65_sign(key: MLDSA65PrivateKey, message: bytes, context: bytes) -> bytes:
    """Hedged pure ML-DSA-65 signature of ``message`` under ``context`` (FIPS 204 Algorithm 2)."""
    return key.sign(message, context)


#: Threads that sign the second and later messages of :func:`mldsa65_sign_all`; made on first
#: use, and again in a forked child (``saihm serve --workers``), whose copy has no threads.
_SIGNING_THREADS = 2
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
#: Calls of :func:`mldsa65_sign_all` under way in this process.
_under_way = 0


def _forget_pool() -> None:
    global _pool, _pool_lock, _under_way
    _pool, _pool_lock, _under_way = None, threading.Lock(), 0


os.register_at_fork(after_in_child=_forget_pool)


def _signing_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_SIGNING_THREADS, thread_name_prefix="saihm-sign")
        return _pool


def mldsa65_sign_all(key: MLDSA65PrivateKey, items: Sequence[tuple[bytes, bytes]]) -> list[bytes]:
    """:func:`mldsa65_sign` of each ``(message, context)``, in order.

    When no other call is under way, the first is signed in the calling thread while the others
    are signed on shared threads: a lone remember's cell and receipt take the time of one
    signature where two cores are free. When other calls are under way their threads already
    keep the cores busy, and handing work to another thread would only add a switch, so each
    message is signed here in turn.
    """
    global _under_way
    if len(items) < 2:
        return [mldsa65_sign(key, m, c) for m, c in items]
    with _pool_lock:
        alone = _under_way == 0
        _under_way += 1
    try:
        if not alone:
            return [mldsa65_sign(key, m, c) for m, c in items]
        pool = _signing_pool()
        rest = [pool.submit(mldsa65_sign, key, m, c) for m, c in items[1:]]
        first = mldsa65_sign(key, *items[0])
        return [first, *(future.result() for future in rest)]
    finally:
        with _pool_lock:
            _under_way -= 1


def mldsa65_verify(public_key: bytes, signature: bytes, message: bytes, context: bytes) -> None:
    """Verify a pure ML-DSA-65 signature; raise ``InvalidSignature`` on any failure."""
    if len(public_key) != MLDSA65_PUBLIC_KEY_SIZE or len(signature) != MLDSA65_SIGNATURE_SIZE:
        raise InvalidSignature("ML-DSA-65 key or signature has the wrong length")
    try:
        key = MLDSA65PublicKey.from_public_bytes(public_key)
    except ValueError as err:
        raise InvalidSignature("not an ML-DSA-65 public key") from err
    key.verify(signature, message, context)


def mldsa44_from_seed(xi: bytes) -> MLDSA44PrivateKey:
    """ML-DSA-44 key from a 32-byte seed (used for the log's own checkpoint key)."""
    if len(xi) != 32:
        raise ValueError("ML-DSA seed must be 32 bytes")
    return MLDSA44PrivateKey.from_seed_bytes(xi)


def mldsa44_public_bytes(key: MLDSA44PrivateKey) -> bytes:
    """The raw 1312-byte encoded public key."""
    return key.public_key().public_bytes_raw()


def mldsa44_verify(public_key: bytes, signature: bytes, message: bytes, context: bytes) -> None:
    """Verify a pure ML-DSA-44 signature; raise ``InvalidSignature`` on any failure."""
    if len(public_key) != MLDSA44_PUBLIC_KEY_SIZE or len(signature) != MLDSA44_SIGNATURE_SIZE:
        raise InvalidSignature("ML-DSA-44 key or signature has the wrong length")
    try:
        key = MLDSA44PublicKey.from_public_bytes(public_key)
    except ValueError as err:
        raise InvalidSignature("not an ML-DSA-44 public key") from err
    key.verify(signature, message, context)
