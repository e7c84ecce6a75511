"""Record MACs: projection records that grant access fail closed (docs/security.md).

requirements.txt: a record is signed "so a later change is detectable even to someone with direct
database access". The projections that widen what a token may see or do (cell records, record
heads, contracts and their grantee and owner indexes with the acceptances inside them, grants,
holders and session revocations) are stored as ``value || tag``, where ``tag`` is
HMAC-SHA-256 over the database name, the key and the value under a key derived from the memo key
(kept with the KEKs, off the data volume: saihm/keyring/kekdir.py). Someone who can write LMDB
but cannot read the KEK directory can therefore delete such a record (access shrinks) or put back
an older authentic one (a rollback: ``saihm verify --data`` finds it, because the projections then
differ from a rebuild), but cannot forge or edit one: a reader refuses it and it grants nothing.

The tag is a deterministic function of (name, key, value), so a rebuild writes the same bytes.
"""

from __future__ import annotations

import hmac
import logging

log = logging.getLogger("saihm.store")

TAG_BYTES = 32
_LABEL = b"saihm projection record MAC v1"

__all__ = ["TAG_BYTES", "RecordSeal", "derive_record_key"]


def derive_record_key(memo_key: bytes) -> bytes:
    """The record-MAC key: HMAC-SHA-256(memo key, label), separate from every memo use."""
    return hmac.digest(memo_key, _LABEL, "sha256")


class RecordSeal:
    """Seals and opens the stored values of the MAC-bound projection databases."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("a record-MAC key is 32 bytes")
        self._key = key

    def __repr__(self) -> str:
        return "RecordSeal(<key hidden>)"

    def tag(self, name: bytes, key: bytes, value: bytes) -> bytes:
        """HMAC-SHA-256 over ``len(name) || name || len(key) || key || value`` (lengths u8, u16)."""
        head = len(name).to_bytes(1, "big") + name + len(key).to_bytes(2, "big")
        message = head + key + value
        return hmac.digest(self._key, message, "sha256")

    def seal(self, name: bytes, key: bytes, value: bytes) -> bytes:
        """The stored form of ``value`` under ``key`` in database ``name``."""
        return value + self.tag(name, key, value)

    def open(self, name: bytes, key: bytes, stored: bytes | memoryview | None) -> bytes | None:
        """The value inside ``stored``, or None when ``stored`` is None or its tag is missing or
        wrong; a refused record is logged as a warning naming the database and the key (never
        the value)."""
        if stored is None:
            return None
        stored = bytes(stored)
        value, tag = stored[:-TAG_BYTES], stored[-TAG_BYTES:]
        if len(stored) < TAG_BYTES or not hmac.compare_digest(tag, self.tag(name, key, value)):
            what = "projection record refused (MAC missing or wrong): %s key %s"
            log.warning(what, name.decode(), bytes(key).hex())
            return None
        return value

    def valid(self, name: bytes, key: bytes, stored: bytes) -> bool:
        """Whether ``stored`` carries the right tag (no logging; the fsck reports it)."""
        if len(stored) < TAG_BYTES:
            return False
        value, tag = stored[:-TAG_BYTES], stored[-TAG_BYTES:]
        return hmac.compare_digest(tag, self.tag(name, key, value))
