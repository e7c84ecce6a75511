"""C2SP signed notes (c2sp.org/signed-note) with Ed25519 note keys (signature type 0x01).

A signed note is a text ending in a newline, a blank line, then one or more lines
``— <key name> base64(key ID (4 bytes) || signature)``. ``open_note`` parses strictly: anything
malformed is rejected, never skipped; unknown keys are ignored and never trusted; a known key
whose signature fails rejects the whole note; at least one known key must verify.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from saihm.errors import VerificationFailed, rejects, require_type

__all__ = [
    "ED25519",
    "MAX_SIGNATURES",
    "Ed25519Signer",
    "Ed25519Verifier",
    "NoteError",
    "NoteSignature",
    "Signer",
    "Verifier",
    "b64decode_strict",
    "check_key_name",
    "key_id",
    "open_note",
    "parse_vkey",
    "sign_note",
]

ED25519 = 0x01
MAX_SIGNATURES = 100
_DASH = "\u2014 "
#: Control characters other than newline (U+0000..U+001F but U+000A).
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f]")


class NoteError(VerificationFailed):
    """A signed note, verifier key or checkpoint that is malformed or does not verify."""

    code = "bad_note"


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line: key name, 4-byte key ID and the signature bytes after it."""

    name: str
    key_id: bytes
    signature: bytes


class Signer(Protocol):
    """Something that signs note text under a key name and key ID."""

    name: str
    key_id: bytes

    def sign(self, text: bytes) -> bytes:
        """Return the signature bytes (without the key ID) over ``text``."""
        ...


class Verifier(Protocol):
    """Something that checks one signature over note text; raises ``NoteError`` on failure."""

    name: str
    key_id: bytes
    sig_type: int

    def verify(self, text: bytes, signature: bytes) -> None:
        """Raise ``NoteError`` unless ``signature`` is valid over ``text``."""
        ...


@rejects(NoteError)
def b64decode_strict(text: str | bytes) -> bytes:
    """Decode standard, padded base64 and require the canonical encoding; raise ``NoteError``."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    try:
        value = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as err:
        raise NoteError("invalid base64") from err
    if base64.b64encode(value) != raw:
        raise NoteError("non-canonical base64")
    return value


@rejects(NoteError)
def check_key_name(name: str) -> str:
    """Return ``name`` if it is a valid key name: non-empty, no Unicode space, no ``+``."""
    require_type(name, str, "check_key_name: name", NoteError)
    if not name or "+" in name or any(c.isspace() for c in name):
        raise NoteError("key name must be non-empty without spaces or '+'")
    if any(ord(c) < 0x20 for c in name):
        raise NoteError("key name must not contain control characters")
    return name


@rejects(NoteError)
def key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """``SHA-256(name || 0x0A || type || public key)[:4]`` (c2sp.org/signed-note "Signatures")."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([sig_type]) + public_key).digest()[:4]


@rejects(NoteError)
def parse_vkey(vkey: str) -> tuple[str, bytes, int, bytes]:
    """Split ``<name>+<key id hex>+<base64(type || public key)>`` into its parts.

    Returns (name, key_id, type, public_key) after checking that the key ID is the one the
    name, type and key determine. Raises ``NoteError`` otherwise.
    """
    require_type(vkey, str, "parse_vkey: vkey", NoteError)
    parts = vkey.split("+", 2)
    if len(parts) != 3:
        raise NoteError("verifier key must be <name>+<hex id>+<base64 key>")
    name, id_hex, key_b64 = parts
    check_key_name(name)
    if len(id_hex) != 8 or id_hex != id_hex.lower():
        raise NoteError("verifier key ID must be 8 lowercase hex digits")
    try:
        kid = bytes.fromhex(id_hex)
    except ValueError as err:
        raise NoteError("verifier key ID is not hex") from err
    material = b64decode_strict(key_b64)
    if len(material) < 2:
        raise NoteError("verifier key material is too short")
    sig_type, public_key = material[0], material[1:]
    if key_id(name, sig_type, public_key) != kid:
        raise NoteError("verifier key ID does not match the key")
    return name, kid, sig_type, public_key


class Ed25519Verifier:
    """Verifies Ed25519 note signatures (type 0x01) over the note text."""

    sig_type = ED25519

    @rejects(NoteError)
    def __init__(self, name: str, public_key: bytes) -> None:
        if len(public_key) != 32:
            raise NoteError("Ed25519 public key must be 32 bytes")
        self.name = check_key_name(name)
        self.public_key = public_key
        self.key_id = key_id(name, ED25519, public_key)
        self._key = Ed25519PublicKey.from_public_bytes(public_key)

    @classmethod
    @rejects(NoteError)
    def from_vkey(cls, vkey: str) -> Ed25519Verifier:
        """Parse a ``<name>+<id>+<base64(0x01 || key)>`` verifier key; raise ``NoteError``."""
        name, _, sig_type, public_key = parse_vkey(vkey)
        if sig_type != ED25519:
            raise NoteError("not an Ed25519 verifier key")
        return cls(name, public_key)

    def vkey(self) -> str:
        """The verifier key string."""
        material = base64.b64encode(bytes([ED25519]) + self.public_key).decode()
        return f"{self.name}+{self.key_id.hex()}+{material}"

    @rejects(NoteError)
    def verify(self, text: bytes, signature: bytes) -> None:
        """Raise ``NoteError`` unless ``signature`` is this key's Ed25519 signature of ``text``."""
        try:
            self._key.verify(signature, text)
        except InvalidSignature as err:
            raise NoteError(f"invalid signature by {self.name}") from err


class Ed25519Signer:
    """Signs note text with an Ed25519 key (RFC 8032; deterministic)."""

    @rejects(NoteError)
    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        self.name = check_key_name(name)
        self._key = private_key
        public = private_key.public_key().public_bytes_raw()
        self.verifier = Ed25519Verifier(name, public)
        self.key_id = self.verifier.key_id

    @classmethod
    @rejects(NoteError)
    def from_skey(cls, skey: str) -> Ed25519Signer:
        """Parse Go's ``PRIVATE+KEY+<name>+<hex id>+<base64(0x01 || seed)>`` private key."""
        require_type(skey, str, "Ed25519Signer.from_skey: skey", NoteError)
        parts = skey.split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise NoteError("private key must be PRIVATE+KEY+<name>+<id>+<base64>")
        material = b64decode_strict(parts[4])
        if len(material) != 33 or material[0] != ED25519:
            raise NoteError("not an Ed25519 private key")
        signer = cls(parts[2], Ed25519PrivateKey.from_private_bytes(material[1:]))
        if signer.key_id.hex() != parts[3]:
            raise NoteError("private key ID does not match the key")
        return signer

    def skey(self) -> str:
        """The private key string in Go's format (a secret: store it with mode 0600)."""
        seed = self._key.private_bytes_raw()
        material = base64.b64encode(bytes([ED25519]) + seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.key_id.hex()}+{material}"

    @rejects(NoteError)
    def sign(self, text: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of ``text``."""
        return self._key.sign(text)


def _check_text(text: bytes) -> str:
    require_type(text, (bytes, bytearray), "note", NoteError)
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as err:
        raise NoteError("note is not valid UTF-8") from err
    if _CONTROL.search(decoded):
        raise NoteError("note contains a control character other than newline")
    return decoded


@rejects(NoteError)
def sign_note(text: bytes, signers: Sequence[Signer]) -> bytes:
    """Return ``text`` signed by each of ``signers`` in order (c2sp.org/signed-note "Format").

    ``text`` must be valid UTF-8 without control characters other than newline and end with a
    newline. Raises ``NoteError`` otherwise, or if there is no signer.
    """
    _check_text(text)
    if not text.endswith(b"\n"):
        raise NoteError("note text must end with a newline")
    if text == b"\n":
        # parse_note refuses an empty text, so signing one would make a note nobody can open.
        raise NoteError("note text is empty")
    if not signers:
        raise NoteError("a note needs at least one signature")
    lines = [text, b"\n"]
    for signer in signers:
        blob = base64.b64encode(signer.key_id + signer.sign(text))
        lines.append(_DASH.encode() + check_key_name(signer.name).encode() + b" " + blob + b"\n")
    return b"".join(lines)


@rejects(NoteError)
def parse_note(note: bytes) -> tuple[bytes, list[NoteSignature]]:
    """Split a signed note into its text and signature lines without verifying anything.

    Raises ``NoteError`` for: invalid UTF-8, control characters, no final newline, no blank
    line, no signature, more than ``MAX_SIGNATURES`` signatures, or any malformed signature
    line (missing dash, bad key name, non-canonical base64, fewer than 5 decoded bytes).
    """
    decoded = _check_text(note)
    if not decoded.endswith("\n"):
        raise NoteError("note must end with a newline")
    split = decoded.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no blank line before its signatures")
    text = decoded[: split + 1]
    if not text.strip("\n") and text == "\n":
        raise NoteError("note text is empty")
    block = decoded[split + 2 :]
    lines = block.split("\n")[:-1]
    if not lines:
        raise NoteError("note has no signatures")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError("note has too many signatures")
    signatures = []
    for line in lines:
        if not line.startswith(_DASH):
            raise NoteError("signature line must start with an em dash and a space")
        fields = line[len(_DASH) :].split(" ")
        if len(fields) != 2:
            raise NoteError("signature line must be '— <name> <base64>'")
        name = check_key_name(fields[0])
        blob = b64decode_strict(fields[1])
        if len(blob) < 5:
            raise NoteError("signature is shorter than a key ID and one byte")
        signatures.append(NoteSignature(name, blob[:4], blob[4:]))
    return text.encode(), signatures


@rejects(NoteError)
def open_note(note: bytes, verifiers: Sequence[Verifier]) -> tuple[bytes, list[NoteSignature]]:
    """Verify a signed note; return its text and the signatures that verified.

    Follows c2sp.org/signed-note "Signatures": a signature whose (name, key ID) matches no
    verifier is ignored; one that matches is verified and, if invalid, rejects the note; if none
    verifies the note is rejected. Raises ``NoteError``.
    """
    text, signatures = parse_note(note)
    known = {(v.name, v.key_id): v for v in verifiers}
    verified = []
    for sig in signatures:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            continue
        verifier.verify(text, sig.signature)
        verified.append(sig)
    if not verified:
        raise NoteError("no signature from a known key")
    return text, verified
