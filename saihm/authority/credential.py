"""The authority service's admin credential: made once in the authority directory (mode 0600),
read there by the person who runs the operator; the service keeps only its SHA-256."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from saihm.errors import MalformedInput, Unauthenticated

__all__ = ["CREDENTIAL_FILE", "check_credential", "load_or_create_credential"]

#: The admin credential's file in the authority directory (mode 0600).
CREDENTIAL_FILE = "admin.credential"


def load_or_create_credential(directory: Path) -> tuple[bytes, bool]:
    """The SHA-256 of the admin credential in ``directory`` (made there first, mode 0600, if
    absent) and whether it was made now. Raises :class:`MalformedInput` for an empty or
    unreadable credential file (its content is never quoted)."""
    path = directory / CREDENTIAL_FILE
    created = False
    if not path.exists():
        credential = "saihm-admin-" + secrets.token_urlsafe(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another start made it first: read theirs
        else:
            with os.fdopen(fd, "w") as f:
                f.write(credential + "\n")
            created = True
    text = path.read_text(encoding="ascii", errors="replace").strip()
    if len(text) < 16 or any(c.isspace() or not c.isprintable() for c in text):
        raise MalformedInput(f"{path} does not hold an admin credential (delete it to make one)")
    return hashlib.sha256(text.encode()).digest(), created


def check_credential(authorization: str, credential_sha256: bytes) -> None:
    """Raise :class:`Unauthenticated` unless ``authorization`` is ``Bearer <credential>``;
    the digests are compared in constant time, and no message quotes the value."""
    scheme, _, value = authorization.partition(" ")
    presented = hashlib.sha256(value.strip().encode("utf-8", "replace")).digest()
    matches = hmac.compare_digest(presented, credential_sha256)
    if scheme.lower() != "bearer" or not matches:
        raise Unauthenticated("the admin credential is missing or wrong")
