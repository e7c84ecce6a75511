"""The capability authority: an ML-DSA-65 key that signs tokens, kept in its own directory."""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from pathlib import Path

from saihm.config import AUTHORITY_PUBLIC_FILE, AUTHORITY_SEED_FILE
from saihm.errors import MalformedInput
from saihm.events import Capability, CapabilityScope, sign_capability
from saihm.events.capability import ISSUABLE_TOKEN_CHARS
from saihm.events.identity import AuthorityKey
from saihm.mldsa import MLDSA65_SIGNATURE_SIZE

__all__ = ["ISSUABLE_TOKEN_CHARS", "Authority", "check_token_fits"]

_ID_KEY_LABEL = b"saihm authority id key v1"
_ID_LABEL = b"saihm authority id v1\x00"


def _refuse(chars: int) -> MalformedInput:
    return MalformedInput(
        f"the token would be {chars} characters; a server reads at most {ISSUABLE_TOKEN_CHARS} "
        "(name fewer or shorter namespaces)",
        code="token_too_long",
    )


def check_token_fits(
    holder_id: bytes, session_id: bytes | None, scope: CapabilityScope, expires_at: int
) -> int:
    """The length of the token these fields make; raises :class:`MalformedInput`
    ("token_too_long") when it is over :data:`ISSUABLE_TOKEN_CHARS`.

    Callers that log a GRANT before issuing its token check first, so a refused token leaves
    no grant behind; a ``grant_id`` not yet known may be any 32 bytes (the length is the same).
    The signature is fixed-size (ML-DSA-65), so the measure is exact.
    """
    draft = Capability(
        holder_id=holder_id,
        session_id=session_id,
        scope=scope,
        expires_at=expires_at,
        token_id=bytes(16),
        # A stand-in of the signature's size: the token is measured before it is signed.
        signature=bytes(MLDSA65_SIGNATURE_SIZE),
    )
    chars = len(draft.to_token())
    if chars > ISSUABLE_TOKEN_CHARS:
        raise _refuse(chars)
    return chars


class Authority:
    """Issues capability tokens (context "SAIHM-CAPABILITY-v1").

    Tokens carry ``{holderId, sessionId, scope, expiresAt, tokenId}``; the store accepts a
    token only with a valid signature, before its expiry, and, for a grant, while the grant's
    GRANT receipt is in the log and no UNGRANT follows it.
    """

    def __init__(self, key: AuthorityKey, directory: Path) -> None:
        self._key = key
        self.directory = directory
        # The key that binds the ids this authority mints to their holder (never leaves here).
        self._id_key = hmac.digest(key.seed_bytes(), _ID_KEY_LABEL, hashlib.sha256)

    def __repr__(self) -> str:
        return f"Authority(directory={str(self.directory)!r})"

    @classmethod
    def open(cls, directory: str | Path, *, create: bool = False) -> Authority:
        """Load the authority key from ``directory``, creating it first if ``create``."""
        path = Path(directory)
        seed_file = path / AUTHORITY_SEED_FILE
        if not seed_file.exists():
            if not create:
                raise MalformedInput(f"no authority key in {path}")
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(seed_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(AuthorityKey.generate().seed_bytes())
        key = AuthorityKey.from_seed(seed_file.read_bytes())
        public = path / AUTHORITY_PUBLIC_FILE
        if not public.exists():
            public.write_bytes(key.public_key)
        return cls(key, path)

    def _bound(self, holder_id: bytes, nonce: bytes) -> bytes:
        """``nonce`` followed by a tag binding it to ``holder_id``, as long as the nonce."""
        tag = hmac.digest(self._id_key, _ID_LABEL + holder_id + nonce, hashlib.sha256)
        return nonce + tag[: len(nonce)]

    def session_id(self, holder_id: bytes) -> bytes:
        """A new sessionId of ``holder_id``: 16 random bytes and a 16-byte HMAC tag binding
        them to the holder, so :meth:`minted` can later tell whose session it is without a
        record of every session opened (docs/authority.md "Ids belong to their holder")."""
        return self._bound(holder_id, os.urandom(16))

    def token_id(self, holder_id: bytes) -> bytes:
        """A new tokenId of ``holder_id``: 8 random bytes and an 8-byte tag, as
        :meth:`session_id`."""
        return self._bound(holder_id, os.urandom(8))

    def minted(self, holder_id: bytes, token_or_session_id: bytes) -> bool:
        """Whether this authority minted ``token_or_session_id`` (32 bytes: a sessionId, 16: a
        tokenId) for ``holder_id``. False for another holder's id, for any other length and
        for an id minted before ids were bound (random: one in 2^64 or 2^128 passes)."""
        if len(token_or_session_id) not in (16, 32):
            return False
        nonce = token_or_session_id[: len(token_or_session_id) // 2]
        return hmac.compare_digest(self._bound(holder_id, nonce), token_or_session_id)

    @property
    def public_key(self) -> bytes:
        """The ML-DSA-65 public key the serving process pins."""
        return self._key.public_key

    def issue(
        self,
        holder_id: bytes,
        session_id: bytes,
        scope: CapabilityScope,
        ttl: int,
        *,
        now: int | None = None,
    ) -> Capability:
        """Sign a capability for ``holder_id`` valid for ``ttl`` seconds.

        Refuses (:class:`MalformedInput`, "token_too_long") a token longer than
        :data:`ISSUABLE_TOKEN_CHARS`, which no server could read from its Authorization header.
        """
        if ttl <= 0:
            raise MalformedInput("a token's lifetime must be positive")
        issued = int(time.time()) if now is None else now
        check_token_fits(holder_id, session_id, scope, issued + ttl)
        cap = sign_capability(
            self._key,
            holder_id=holder_id,
            session_id=session_id,
            scope=scope,
            expires_at=issued + ttl,
            token_id=self.token_id(holder_id),
        )
        chars = len(cap.to_token())
        if chars > ISSUABLE_TOKEN_CHARS:  # the measure above is exact; this keeps it honest
            raise _refuse(chars)
        return cap
