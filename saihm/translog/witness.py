"""Witness cosignatures and the witness protocol's wire formats, as pure functions.

- c2sp.org/tlog-cosignature: Ed25519 ``cosignature/v1`` (signature type 0x04) over
  ``"cosignature/v1\\n" "time <T>\\n"`` followed by the whole checkpoint body, as a
  ``timestamped_signature`` (u64 timestamp || 64-byte signature); ML-DSA-44 ``subtree/v1``
  (type 0x06) is signed by :class:`SubtreeV1Signer` and verified with
  :class:`saihm.translog.checkpoint.MLDSA44Verifier`.
- c2sp.org/tlog-witness "add-checkpoint": the request body (``old <size>``, at most 63 base64
  consistency proof lines, an empty line, the signed checkpoint) and the response body (one or
  more note signature lines).
- :func:`parse_witness` and :func:`parse_witnesses` read the ``URL=VKEY`` strings that configure
  the witnesses a log submits to (``Config.witnesses``, ``saihm serve --witness``).
- :func:`append_cosignatures` merges cosignature lines into a signed note and
  :func:`verify_cosignatures` counts the witnesses (of those the caller names) whose
  cosignature on a checkpoint verifies.

Nothing here touches the network or the disk.
"""

from __future__ import annotations

import base64
import os
import re
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from saihm.errors import MalformedInput, rejects, require_type
from saihm.mldsa import mldsa44_from_seed, mldsa44_public_bytes
from saihm.translog.checkpoint import MLDSA44, Checkpoint, MLDSA44Verifier, cosigned_message
from saihm.translog.note import (
    MAX_SIGNATURES,
    NoteError,
    NoteSignature,
    Verifier,
    b64decode_strict,
    check_key_name,
    key_id,
    parse_note,
    parse_vkey,
)

__all__ = [
    "COSIGNATURE_V1",
    "MAX_CLOCK_SKEW",
    "MAX_PROOF_LINES",
    "AddCheckpoint",
    "CosignatureV1Signer",
    "CosignatureV1Verifier",
    "SubtreeV1Signer",
    "WitnessEndpoint",
    "add_checkpoint_body",
    "append_cosignatures",
    "cosignature_timestamp",
    "cosignature_v1_message",
    "group_witness_keys",
    "parse_add_checkpoint",
    "parse_cosignature_lines",
    "parse_witness",
    "parse_witnesses",
    "verify_cosignatures",
    "witness_verifier",
]

COSIGNATURE_V1 = 0x04
#: c2sp.org/tlog-witness: "The client MUST NOT send more than 63 consistency proof lines."
MAX_PROOF_LINES = 63
#: How far in the future a cosignature timestamp may be before it is not sane (seconds).
MAX_CLOCK_SKEW = 300
_DASH = "\u2014 "
_OLD = re.compile(r"old (0|[1-9][0-9]{0,19})")
_HEADER = b"cosignature/v1\n"


@rejects(NoteError)
def cosignature_v1_message(body: bytes, timestamp: int) -> bytes:
    """The Ed25519 ``cosignature/v1`` signed message (c2sp.org/tlog-cosignature "Ed25519
    signed message"): the header line, ``time <timestamp>`` and the whole checkpoint body."""
    if not 0 <= timestamp < 1 << 63:
        raise NoteError("cosignature timestamp must be 0..2**63 - 1")
    return _HEADER + b"time %d\n" % timestamp + body


class CosignatureV1Verifier:
    """Verifies Ed25519 ``cosignature/v1`` signatures (type 0x04) over a checkpoint body."""

    sig_type = COSIGNATURE_V1

    @rejects(NoteError)
    def __init__(self, name: str, public_key: bytes) -> None:
        if len(public_key) != 32:
            raise NoteError("Ed25519 cosigner public key must be 32 bytes")
        self.name = check_key_name(name)
        self.public_key = public_key
        self.key_id = key_id(name, COSIGNATURE_V1, public_key)
        self._key = Ed25519PublicKey.from_public_bytes(public_key)

    def vkey(self) -> str:
        """The verifier key ``<name>+<key id hex>+<base64(0x04 || public key)>``."""
        material = base64.b64encode(bytes([COSIGNATURE_V1]) + self.public_key).decode()
        return f"{self.name}+{self.key_id.hex()}+{material}"

    @rejects(NoteError)
    def verify(self, text: bytes, signature: bytes) -> None:
        """Check a ``timestamped_signature`` (u64 timestamp || 64-byte Ed25519) over ``text``.

        Raises ``NoteError`` for a wrong length, a timestamp above 2**63 - 1, a text that is
        not a checkpoint, or a signature that does not verify.
        """
        if len(signature) != 8 + 64:
            raise NoteError(f"cosignature by {self.name} has the wrong length")
        timestamp = struct.unpack(">Q", signature[:8])[0]
        Checkpoint.parse(text)
        message = cosignature_v1_message(text, timestamp)
        try:
            self._key.verify(signature[8:], message)
        except InvalidSignature as err:
            raise NoteError(f"invalid cosignature by {self.name}") from err


class CosignatureV1Signer:
    """A witness's Ed25519 cosigning key: signs ``cosignature/v1`` with the current time."""

    @rejects(NoteError)
    def __init__(
        self, name: str, private_key: Ed25519PrivateKey, *, clock: object = time.time
    ) -> None:
        self.name = check_key_name(name)
        self._key = private_key
        self.verifier = CosignatureV1Verifier(name, private_key.public_key().public_bytes_raw())
        self.key_id = self.verifier.key_id
        self._clock = clock

    @classmethod
    @rejects(NoteError)
    def generate(cls, name: str) -> CosignatureV1Signer:
        """A fresh key under ``name`` (a key name: non-empty, no spaces or '+')."""
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    @rejects(NoteError)
    def from_skey(cls, skey: str) -> CosignatureV1Signer:
        """Parse ``PRIVATE+KEY+<name>+<hex id>+<base64(0x04 || seed)>``; raise ``NoteError``."""
        require_type(skey, str, "CosignatureV1Signer.from_skey: skey", NoteError)
        parts = skey.strip().split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise NoteError("witness key must be PRIVATE+KEY+<name>+<id>+<base64>")
        material = b64decode_strict(parts[4])
        if len(material) != 33 or material[0] != COSIGNATURE_V1:
            raise NoteError("not an Ed25519 cosignature/v1 private key")
        signer = cls(parts[2], Ed25519PrivateKey.from_private_bytes(material[1:]))
        if signer.key_id.hex() != parts[3]:
            raise NoteError("witness key ID does not match the key")
        return signer

    def skey(self) -> str:
        """The private key string (a secret: store it with mode 0600)."""
        seed = self._key.private_bytes_raw()
        material = base64.b64encode(bytes([COSIGNATURE_V1]) + seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.key_id.hex()}+{material}"

    def vkey(self) -> str:
        """The public verifier key to give to log clients."""
        return self.verifier.vkey()

    @rejects(NoteError)
    def cosign(self, body: bytes, timestamp: int | None = None) -> bytes:
        """The note signature line (``— <name> base64(key id || timestamped_signature)\\n``)
        cosigning the checkpoint ``body``, stamped ``timestamp`` (default: now)."""
        Checkpoint.parse(body)
        stamp = int(self._clock()) if timestamp is None else timestamp  # type: ignore[operator]
        signature = self._key.sign(cosignature_v1_message(body, stamp))
        blob = base64.b64encode(self.key_id + struct.pack(">Q", stamp) + signature).decode()
        return f"{_DASH}{self.name} {blob}\n".encode()


class SubtreeV1Signer:
    """A witness's ML-DSA-44 cosigning key: ``subtree/v1`` checkpoint cosignatures (type
    0x06, c2sp.org/tlog-cosignature "ML-DSA-44 signed message", start = 0), stamped now."""

    @rejects(NoteError)
    def __init__(self, name: str, seed: bytes, *, clock: object = time.time) -> None:
        if len(seed) != 32:
            raise NoteError("ML-DSA-44 seed must be 32 bytes")
        self.name = check_key_name(name)
        self._seed = seed
        self._key = mldsa44_from_seed(seed)
        self.verifier = MLDSA44Verifier(name, mldsa44_public_bytes(self._key))
        self.key_id = self.verifier.key_id
        self._clock = clock

    @classmethod
    @rejects(NoteError)
    def generate(cls, name: str) -> SubtreeV1Signer:
        """A fresh key under ``name``."""
        return cls(name, os.urandom(32))

    @classmethod
    @rejects(NoteError)
    def from_skey(cls, skey: str) -> SubtreeV1Signer:
        """Parse ``PRIVATE+KEY+<name>+<hex id>+<base64(0x06 || seed)>``; raise ``NoteError``."""
        require_type(skey, str, "SubtreeV1Signer.from_skey: skey", NoteError)
        parts = skey.strip().split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise NoteError("witness key must be PRIVATE+KEY+<name>+<id>+<base64>")
        material = b64decode_strict(parts[4])
        if len(material) != 33 or material[0] != MLDSA44:
            raise NoteError("not an ML-DSA-44 private key")
        signer = cls(parts[2], material[1:])
        if signer.key_id.hex() != parts[3]:
            raise NoteError("witness key ID does not match the key")
        return signer

    def skey(self) -> str:
        """The private key string (a secret: store it with mode 0600)."""
        material = base64.b64encode(bytes([MLDSA44]) + self._seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.key_id.hex()}+{material}"

    def vkey(self) -> str:
        """The public verifier key to give to log clients."""
        return self.verifier.vkey()

    @rejects(NoteError)
    def cosign(self, body: bytes, timestamp: int | None = None) -> bytes:
        """The note signature line cosigning the checkpoint ``body`` (u64 timestamp ||
        2,420-byte ML-DSA-44 signature, empty context)."""
        cp = Checkpoint.parse(body)
        stamp = int(self._clock()) if timestamp is None else timestamp  # type: ignore[operator]
        message = cosigned_message(self.name, stamp, cp.origin, cp.size, cp.root_hash)
        signature = struct.pack(">Q", stamp) + self._key.sign(message, b"")
        blob = base64.b64encode(self.key_id + signature).decode()
        return f"{_DASH}{self.name} {blob}\n".encode()


@rejects(NoteError)
def witness_verifier(vkey: str) -> Verifier:
    """A cosignature verifier from a witness's verifier key: type 0x04 (Ed25519
    ``cosignature/v1``) or 0x06 (ML-DSA-44 ``subtree/v1``). Raises ``NoteError``."""
    name, _, sig_type, public_key = parse_vkey(vkey)
    if sig_type == COSIGNATURE_V1:
        return CosignatureV1Verifier(name, public_key)
    if sig_type == MLDSA44:
        if len(public_key) != 1312:
            raise NoteError("ML-DSA-44 public key must be 1312 bytes")
        return MLDSA44Verifier(name, public_key)
    raise NoteError(f"not a cosignature verifier key (type {sig_type:#04x})")


@rejects()
def group_witness_keys(verifiers: Sequence[Verifier]) -> dict[str, list[Verifier]]:
    """The witness verifiers by witness name, in the order given.

    One witness may have one key of each cosignature type under its name (an Ed25519
    ``cosignature/v1`` key and an ML-DSA-44 one, c2sp.org/tlog-cosignature); either key's
    valid line shows that the witness cosigned, and the witness counts once. Raises
    ``MalformedInput`` for a key given twice or two keys of one type under one name.
    """
    groups: dict[str, list[Verifier]] = {}
    for verifier in verifiers:
        group = groups.setdefault(verifier.name, [])
        if any(v.key_id == verifier.key_id for v in group):
            raise MalformedInput(f"the key of witness {verifier.name} is given twice")
        if any(v.sig_type == verifier.sig_type for v in group):
            raise MalformedInput(
                f"two keys of one type for witness {verifier.name} (give at most one "
                "Ed25519 and one ML-DSA-44 key per witness)"
            )
        group.append(verifier)
    return groups


@dataclass(frozen=True)
class WitnessEndpoint:
    """A configured witness: its submission URL prefix and its verifier key."""

    url: str
    vkey: str
    verifier: Verifier

    @property
    def name(self) -> str:
        return self.verifier.name

    @property
    def spec(self) -> str:
        """The ``URL=VKEY`` form (Config.witnesses, ``saihm serve --witness``)."""
        return f"{self.url}={self.vkey}"


@rejects()
def parse_witness(spec: str) -> WitnessEndpoint:
    """Parse ``URL=VKEY``: an http(s) submission prefix and a type 0x04 or 0x06 verifier key.

    The split is at the first ``=`` after which a valid verifier key follows (a URL may hold
    ``=``; a key's base64 usually ends in one). Raises :class:`MalformedInput`.
    """
    for i, char in enumerate(spec):
        if char != "=":
            continue
        url, vkey = spec[:i], spec[i + 1 :]
        try:
            verifier = witness_verifier(vkey)
        except NoteError:
            continue
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MalformedInput(f"witness URL must be http(s)://HOST[:PORT][/PATH]: {url!r}")
        if parts.query or parts.fragment:
            raise MalformedInput("witness URL must have no query or fragment")
        return WitnessEndpoint(url.rstrip("/"), vkey, verifier)
    raise MalformedInput(
        "--witness must be URL=VKEY with VKEY a witness verifier key <name>+<id>+<base64>"
    )


@rejects()
def parse_witnesses(specs: Sequence[str]) -> list[WitnessEndpoint]:
    """Parse every ``URL=VKEY``; raise :class:`MalformedInput` for a bad one, for a key given
    twice or two keys of one type under one witness name
    (:func:`saihm.translog.witness.group_witness_keys`), or for two URLs for one witness.

    A witness may have two entries, its Ed25519 and its ML-DSA-44 key, with the same URL."""
    endpoints = [parse_witness(spec) for spec in specs]
    group_witness_keys([e.verifier for e in endpoints])
    urls: dict[str, str] = {}
    for endpoint in endpoints:
        if urls.setdefault(endpoint.name, endpoint.url) != endpoint.url:
            raise MalformedInput(f"two --witness options give the witness {endpoint.name} two URLs")
    return endpoints


@rejects(NoteError)
def cosignature_timestamp(signature: NoteSignature) -> int:
    """The timestamp at the front of a ``timestamped_signature``; raise ``NoteError``."""
    if len(signature.signature) < 8:
        raise NoteError("cosignature is shorter than its timestamp")
    return int.from_bytes(signature.signature[:8], "big")


@dataclass(frozen=True, slots=True)
class AddCheckpoint:
    """An ``add-checkpoint`` request: the old size, the consistency proof and the signed
    checkpoint note (c2sp.org/tlog-witness "add-checkpoint")."""

    old_size: int
    proof: tuple[bytes, ...]
    note: bytes


@rejects()
def add_checkpoint_body(old_size: int, proof: Sequence[bytes], note: bytes) -> bytes:
    """The ``add-checkpoint`` request body for ``note`` with ``proof`` from ``old_size``."""
    if not 0 <= old_size < 1 << 64:
        raise MalformedInput("old size must be a u64")
    if len(proof) > MAX_PROOF_LINES:
        raise MalformedInput("a consistency proof has at most 63 hashes")
    lines = [f"old {old_size}\n".encode()]
    lines += [base64.b64encode(h) + b"\n" for h in proof]
    return b"".join([*lines, b"\n", note])


@rejects()
def parse_add_checkpoint(body: bytes) -> AddCheckpoint:
    """Parse an ``add-checkpoint`` request body strictly; raise ``MalformedInput``.

    The old size line is ``old <decimal, no leading zeros>``; each proof line one canonical
    base64 hash of 32 bytes, at most 63 of them; then an empty line and the checkpoint note,
    which must parse as a signed note whose text is a checkpoint (c2sp.org/tlog-witness
    "add-checkpoint").
    """
    require_type(body, (bytes, bytearray), "parse_add_checkpoint: body")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise MalformedInput("request body is not UTF-8") from err
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise MalformedInput("request body has no empty line before the checkpoint")
    lines = head.split("\n")
    match = _OLD.fullmatch(lines[0])
    if match is None or int(match.group(1)) >= 1 << 64:
        raise MalformedInput("first line must be 'old <size>'")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise MalformedInput("more than 63 consistency proof lines")
    proof = []
    for line in lines[1:]:
        try:
            value = b64decode_strict(line)
        except NoteError as err:
            raise MalformedInput("a proof line is not canonical base64") from err
        if len(value) != 32:
            raise MalformedInput("a proof line is not a 32-byte hash")
        proof.append(value)
    raw = note.encode("utf-8")
    try:
        Checkpoint.parse(parse_note(raw)[0])
    except NoteError as err:
        raise MalformedInput(f"the checkpoint is not a signed note: {err}") from err
    return AddCheckpoint(int(match.group(1)), tuple(proof), raw)


@rejects()
def parse_cosignature_lines(body: bytes) -> list[bytes]:
    """Split an ``add-checkpoint`` 200 response into its signature lines (each ending in a
    newline). Raises ``NoteError`` unless it is one or more well-formed note signature lines."""
    require_type(body, (bytes, bytearray), "parse_cosignature_lines: body")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise NoteError("cosignature response is not UTF-8") from err
    if not text.endswith("\n") or text == "\n":
        raise NoteError("cosignature response must be signature lines ending in newlines")
    lines = text[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError("too many cosignature lines")
    # parse_note checks every line's shape (dash, key name, canonical base64, length).
    parse_note(b"x\n\n" + text.encode())
    return [line.encode() + b"\n" for line in lines]


@rejects(NoteError)
def append_cosignatures(note: bytes, lines: Sequence[bytes]) -> bytes:
    """``note`` with every line of ``lines`` whose (name, key ID) it does not carry yet
    appended after its own signatures; the note's text and existing lines are unchanged.

    Raises ``NoteError`` if ``note`` or a line is malformed, or the result would exceed the
    signature limit of c2sp.org/signed-note (100).
    """
    _, existing = parse_note(note)
    seen = {(s.name, s.key_id) for s in existing}
    extra = []
    for line in lines:
        (sig,) = parse_note(b"x\n\n" + line)[1]
        if (sig.name, sig.key_id) not in seen:
            seen.add((sig.name, sig.key_id))
            extra.append(line)
    merged = note + b"".join(extra)
    parse_note(merged)
    return merged


@rejects(NoteError)
def verify_cosignatures(
    note_text: bytes | str,
    witness_keys: Sequence[str],
    min_count: int,
    *,
    now: float | None = None,
    max_skew: int = MAX_CLOCK_SKEW,
) -> list[str]:
    """The names of the witnesses among ``witness_keys`` that cosigned the checkpoint note.

    ``note_text`` is a signed checkpoint note (the log's signatures and any cosignatures).
    A cosignature counts when a line with the key's name and key ID verifies
    (c2sp.org/tlog-cosignature) and its timestamp is not more than ``max_skew`` seconds in the
    future. Lines of other keys are ignored. A witness given with two keys (Ed25519 and
    ML-DSA-44, :func:`group_witness_keys`) counts once, whichever of its lines verify.
    Raises ``NoteError`` if a line of a given key does not verify or is stamped in the
    future, or if fewer than ``min_count`` witnesses cosigned; ``MalformedInput`` for keys
    :func:`group_witness_keys` refuses, or if ``min_count`` is negative or above the number of
    witnesses.
    """
    verifiers = [witness_verifier(k) for k in witness_keys]
    witnesses = group_witness_keys(verifiers)
    if not 0 <= min_count <= len(witnesses):
        raise MalformedInput("--min-witnesses must be between 0 and the number of witnesses")
    raw = note_text.encode() if isinstance(note_text, str) else note_text
    text, signatures = parse_note(raw)
    Checkpoint.parse(text)
    clock = time.time() if now is None else now
    known = {(v.name, v.key_id): v for v in verifiers}
    names: list[str] = []
    for sig in signatures:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            continue
        verifier.verify(text, sig.signature)
        if cosignature_timestamp(sig) > clock + max_skew:
            raise NoteError(f"cosignature by {sig.name} is stamped in the future")
        if sig.name not in names:
            names.append(sig.name)
    if len(names) < min_count:
        raise NoteError(
            f"{len(names)} of the given witnesses cosigned the checkpoint; {min_count} required"
        )
    return names
