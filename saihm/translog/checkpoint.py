"""C2SP tlog-checkpoints signed with an Ed25519 note key and an ML-DSA-44 subtree/v1 key.

The body (c2sp.org/tlog-checkpoint "Note text") is the origin line, the decimal tree size, the
base64 root hash, then optional extension lines. ``LogKeys.sign`` returns a signed note with two
signature lines under the origin as key name: Ed25519 over the body (type 0x01,
c2sp.org/signed-note) and ML-DSA-44 over the ``subtree/v1`` ``cosigned_message`` with
``start = 0`` and ``end = size`` (type 0x06, c2sp.org/tlog-cosignature), which
c2sp.org/tlog-checkpoint recommends for a log's own key.
"""

from __future__ import annotations

import base64
import os
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saihm.errors import Conflict, NotFound, rejects, require_type
from saihm.mldsa import (
    MLDSA44_SIGNATURE_SIZE,
    InvalidSignature,
    mldsa44_from_seed,
    mldsa44_public_bytes,
    mldsa44_verify,
)
from saihm.translog.note import (
    ED25519,
    Ed25519Signer,
    Ed25519Verifier,
    NoteError,
    Verifier,
    b64decode_strict,
    check_key_name,
    key_id,
    open_note,
    parse_vkey,
    sign_note,
)

__all__ = ["MLDSA44", "Checkpoint", "LogKeys", "MLDSA44Verifier", "verify_checkpoint"]

MLDSA44 = 0x06
_LABEL = b"subtree/v1\n\x00"
_SIZE = re.compile(r"0|[1-9][0-9]*")
_ED25519_FILE = "checkpoint-ed25519.key"
_MLDSA44_FILE = "checkpoint-mldsa44.key"
_VKEYS_FILE = "checkpoint-verifier-keys.txt"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A tree head: ``origin``, tree ``size`` and ``root_hash`` (32 bytes), plus extension lines."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    @rejects(NoteError)
    def __post_init__(self) -> None:
        if not self.origin or "\n" in self.origin:
            raise NoteError("checkpoint origin must be one non-empty line")
        if not 0 <= self.size < 1 << 64:
            raise NoteError("checkpoint size must be a u64")
        if len(self.root_hash) != 32:
            raise NoteError("checkpoint root hash must be 32 bytes")
        if any(not line or "\n" in line for line in self.extensions):
            raise NoteError("checkpoint extension lines must be non-empty single lines")

    def body(self) -> bytes:
        """The note text: origin, size, base64 root, extension lines, each newline-terminated."""
        root = base64.b64encode(self.root_hash).decode()
        lines = [self.origin, str(self.size), root, *self.extensions]
        return "".join(line + "\n" for line in lines).encode()

    @classmethod
    @rejects(NoteError)
    def parse(cls, body: bytes) -> Checkpoint:
        """Parse a checkpoint body strictly (c2sp.org/tlog-checkpoint "Note text").

        Requires UTF-8 ending in a newline; a non-empty origin; a decimal size without leading
        zeros below 2**64; a canonical base64 root of 32 bytes; non-empty extension lines.
        Raises ``NoteError``.
        """
        require_type(body, (bytes, bytearray), "Checkpoint.parse: body", NoteError)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as err:
            raise NoteError("checkpoint is not UTF-8") from err
        if not text.endswith("\n"):
            raise NoteError("checkpoint must end with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise NoteError("checkpoint needs origin, size and root hash lines")
        origin, size, root, *extensions = lines
        if not _SIZE.fullmatch(size):
            raise NoteError("checkpoint size must be decimal without leading zeros")
        return cls(origin, int(size), b64decode_strict(root), tuple(extensions))


@rejects(NoteError)
def cosigned_message(name: str, timestamp: int, origin: str, end: int, root_hash: bytes) -> bytes:
    """The ``subtree/v1`` ``cosigned_message`` for the checkpoint case (start = 0).

    c2sp.org/tlog-cosignature "ML-DSA-44 signed message": label ``subtree/v1\\n\\0``, the key
    name and the origin as 1-byte-length-prefixed strings, u64 timestamp, u64 start, u64 end, hash.
    """
    require_type(name, str, "cosigned_message: name", NoteError)
    require_type(origin, str, "cosigned_message: origin", NoteError)
    name_b, origin_b = name.encode(), origin.encode()
    if not 0 < len(name_b) < 256 or not 0 < len(origin_b) < 256:
        raise NoteError("cosigner name and origin must be 1..255 bytes")
    return b"".join(
        [
            _LABEL,
            bytes([len(name_b)]),
            name_b,
            struct.pack(">Q", timestamp),
            bytes([len(origin_b)]),
            origin_b,
            struct.pack(">QQ", 0, end),
            root_hash,
        ]
    )


class MLDSA44Verifier:
    """Verifies ML-DSA-44 ``subtree/v1`` signatures (type 0x06) over a checkpoint note text."""

    sig_type = MLDSA44

    @rejects(NoteError)
    def __init__(self, name: str, public_key: bytes) -> None:
        self.name = check_key_name(name)
        self.public_key = public_key
        self.key_id = key_id(name, MLDSA44, public_key)

    def vkey(self) -> str:
        """The verifier key string ``<name>+<id hex>+<base64(0x06 || public key)>``."""
        material = base64.b64encode(bytes([MLDSA44]) + self.public_key).decode()
        return f"{self.name}+{self.key_id.hex()}+{material}"

    @rejects(NoteError)
    def verify(self, text: bytes, signature: bytes) -> None:
        """Check a ``timestamped_signature`` (u64 timestamp || ML-DSA-44 signature) over ``text``.

        Raises ``NoteError`` if the text is not a checkpoint, the timestamp is above 2**63 - 1,
        or the signature does not verify with the empty context.
        """
        if len(signature) != 8 + MLDSA44_SIGNATURE_SIZE:
            raise NoteError(f"ML-DSA-44 signature by {self.name} has the wrong length")
        timestamp = struct.unpack(">Q", signature[:8])[0]
        if timestamp >= 1 << 63:
            raise NoteError("cosignature timestamp exceeds 2**63 - 1")
        cp = Checkpoint.parse(text)
        message = cosigned_message(self.name, timestamp, cp.origin, cp.size, cp.root_hash)
        try:
            mldsa44_verify(self.public_key, signature[8:], message, b"")
        except InvalidSignature as err:
            raise NoteError(f"invalid ML-DSA-44 signature by {self.name}") from err


class _MLDSA44Signer:
    @rejects(NoteError)
    def __init__(self, name: str, seed: bytes, timestamp: int) -> None:
        self.name = name
        self._key = mldsa44_from_seed(seed)
        self.key_id = key_id(name, MLDSA44, mldsa44_public_bytes(self._key))
        self._timestamp = timestamp

    @rejects(NoteError)
    def sign(self, text: bytes) -> bytes:
        cp = Checkpoint.parse(text)
        message = cosigned_message(self.name, self._timestamp, cp.origin, cp.size, cp.root_hash)
        return struct.pack(">Q", self._timestamp) + self._key.sign(message, b"")


@rejects(NoteError)
def verifier_from_key(vkey: str) -> Verifier:
    """Parse a verifier key of type 0x01 (Ed25519) or 0x06 (ML-DSA-44); raise ``NoteError``."""
    name, _, sig_type, public_key = parse_vkey(vkey)
    if sig_type == ED25519:
        return Ed25519Verifier(name, public_key)
    if sig_type == MLDSA44:
        if len(public_key) != 1312:
            raise NoteError("ML-DSA-44 public key must be 1312 bytes")
        return MLDSA44Verifier(name, public_key)
    raise NoteError(f"unsupported verifier key type {sig_type:#04x}")


class LogKeys:
    """The log's two checkpoint keys, both named after the log's origin."""

    @rejects(NoteError)
    def __init__(self, origin: str, ed25519: Ed25519PrivateKey, mldsa44_seed: bytes) -> None:
        self.origin = check_key_name(origin)
        self._ed25519 = Ed25519Signer(origin, ed25519)
        self._seed = mldsa44_seed
        public = mldsa44_public_bytes(mldsa44_from_seed(mldsa44_seed))
        self._mldsa = MLDSA44Verifier(origin, public)

    @classmethod
    @rejects(NoteError)
    def generate(cls, origin: str) -> LogKeys:
        """Fresh keys for ``origin`` (a key name: non-empty, no spaces or '+')."""
        return cls(origin, Ed25519PrivateKey.generate(), os.urandom(32))

    def save(self, directory: str | Path) -> None:
        """Write the private keys (mode 0600, refusing to overwrite) and the verifier keys.

        Raises ``Conflict`` if a key file already exists.
        """
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        seed = base64.b64encode(bytes([MLDSA44]) + self._seed).decode()
        mldsa = f"PRIVATE+KEY+{self.origin}+{self._mldsa.key_id.hex()}+{seed}"
        for name, content in ((_ED25519_FILE, self._ed25519.skey()), (_MLDSA44_FILE, mldsa)):
            try:
                fd = os.open(path / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError as err:
                raise Conflict(f"{name} already exists") from err
            with os.fdopen(fd, "w") as f:
                f.write(content + "\n")
        (path / _VKEYS_FILE).write_text("".join(k + "\n" for k in self.verifier_keys()))

    @classmethod
    def load(cls, directory: str | Path) -> LogKeys:
        """Read the keys ``save`` wrote; raise ``NotFound`` or ``NoteError``."""
        path = Path(directory)
        try:
            ed_text = (path / _ED25519_FILE).read_text().strip()
            ml_text = (path / _MLDSA44_FILE).read_text().strip()
        except FileNotFoundError as err:
            raise NotFound("checkpoint key file missing") from err
        signer = Ed25519Signer.from_skey(ed_text)
        parts = ml_text.split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"] or parts[2] != signer.name:
            raise NoteError("ML-DSA-44 key file is malformed or names another log")
        material = b64decode_strict(parts[4])
        if len(material) != 33 or material[0] != MLDSA44:
            raise NoteError("not an ML-DSA-44 seed")
        keys = cls(signer.name, signer._key, material[1:])
        if keys._mldsa.key_id.hex() != parts[3]:
            raise NoteError("ML-DSA-44 key ID does not match the key")
        return keys

    def verifier_keys(self) -> list[str]:
        """The Ed25519 and ML-DSA-44 verifier keys, ``<name>+<key id hex>+<base64>``."""
        return [self._ed25519.verifier.vkey(), self._mldsa.vkey()]

    @rejects(NoteError)
    def sign(self, checkpoint: Checkpoint, *, timestamp: int | None = None) -> bytes:
        """Return ``checkpoint`` as a signed note with the Ed25519 and ML-DSA-44 signatures.

        ``timestamp`` (POSIX seconds, default now) goes into the subtree/v1 message. Raises
        ``NoteError`` for a checkpoint of another origin or with extension lines (which the
        ML-DSA-44 signature would not cover).
        """
        if checkpoint.origin != self.origin:
            raise NoteError("checkpoint origin is not this log's")
        if checkpoint.extensions:
            raise NoteError("the log signs no extension lines")
        stamp = int(time.time()) if timestamp is None else timestamp
        mldsa = _MLDSA44Signer(self.origin, self._seed, stamp)
        return sign_note(checkpoint.body(), [self._ed25519, mldsa])


@rejects(NoteError)
def verify_checkpoint(
    note: bytes, verifier_keys: list[str], origin: str | None = None
) -> Checkpoint:
    """Verify a signed checkpoint against ``verifier_keys`` and return it.

    c2sp.org/signed-note rules apply (unknown keys ignored, a failing known key rejects, at
    least one known key must verify). The origin must equal ``origin`` when given. Extension
    lines are accepted only under a verified Ed25519 signature, since ML-DSA-44 subtree/v1 does
    not sign them. Raises ``NoteError``.
    """
    verifiers = [verifier_from_key(k) for k in verifier_keys]
    text, verified = open_note(note, verifiers)
    checkpoint = Checkpoint.parse(text)
    if origin is not None and checkpoint.origin != origin:
        raise NoteError("checkpoint origin is not the expected log")
    if checkpoint.extensions:
        types = {
            v.sig_type
            for v in verifiers
            for s in verified
            if (s.name, s.key_id) == (v.name, v.key_id)
        }
        if ED25519 not in types:
            raise NoteError("extension lines are not covered by a verified signature")
    return checkpoint
