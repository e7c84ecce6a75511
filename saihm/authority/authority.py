"""The capability authority: an ML-DSA-65 key that signs tokens, kept in its own directory."""

from __future__ import annotations

import os
import time
from pathlib import Path

from saihm.errors import MalformedInput
from saihm.events import Capability, CapabilityScope, sign_capability
from saihm.events.identity import AuthorityKey

SEED_FILE = "authority.seed"
PUBLIC_FILE = "authority.pub"


class Authority:
    """Issues capability tokens (context "SAIHM-CAPABILITY-v1").

    Tokens carry ``{holderId, sessionId, scope, expiresAt, tokenId}``; the store accepts a
    token only with a valid signature, before its expiry, and, for a grant, while the grant's
    GRANT receipt is in the log and no UNGRANT follows it.
    """

    def __init__(self, key: AuthorityKey, directory: Path) -> None:
        self._key = key
        self.directory = directory

    def __repr__(self) -> str:
        return f"Authority(directory={str(self.directory)!r})"

    @classmethod
    def open(cls, directory: str | Path, *, create: bool = False) -> Authority:
        """Load the authority key from ``directory``, creating it first if ``create``."""
        path = Path(directory)
        seed_file = path / SEED_FILE
        if not seed_file.exists():
            if not create:
                raise MalformedInput(f"no authority key in {path}")
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(seed_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(AuthorityKey.generate().seed_bytes())
        key = AuthorityKey.from_seed(seed_file.read_bytes())
        public = path / PUBLIC_FILE
        if not public.exists():
            public.write_bytes(key.public_key)
        return cls(key, path)

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
        """Sign a capability for ``holder_id`` valid for ``ttl`` seconds."""
        if ttl <= 0:
            raise MalformedInput("a token's lifetime must be positive")
        issued = int(time.time()) if now is None else now
        return sign_capability(
            self._key,
            holder_id=holder_id,
            session_id=session_id,
            scope=scope,
            expires_at=issued + ttl,
        )
