"""Errors raised by ``saihm.events``; all are children of the one root in ``saihm.errors``.

Messages name the rule that failed and never carry key material, plaintext or tokens.
"""

from __future__ import annotations

from saihm.errors import MalformedInput, Unauthenticated, VerificationFailed

__all__ = [
    "CapabilityError",
    "CellIdError",
    "DecodeError",
    "DecryptError",
    "EncodeError",
    "InvalidValue",
    "SignatureError",
]


class DecodeError(MalformedInput):
    """Bytes that are not the one deterministic CBOR encoding of a valid object."""

    code = "malformed_cbor"


class InvalidValue(MalformedInput):
    """A value that does not fit a field of an event model (pydantic's validation failed).

    ``field`` is the dotted location of the first bad field and ``reason`` pydantic's message
    for it; neither carries the value itself.
    """

    def __init__(self, model: str, field: str, reason: str) -> None:
        super().__init__(f"{model}: field {field}: {reason}")
        self.field, self.reason = field, reason


class EncodeError(MalformedInput):
    """A value that has no encoding in saihm's CBOR subset (floats, tags, big integers, ...)."""

    code = "unencodable"


class SignatureError(VerificationFailed):
    """A signature, or the id computed from the signed bytes, does not verify."""

    code = "verification_failed"


class CellIdError(VerificationFailed):
    """A stored cellId differs from SHA-256(kekVersion_be32 || cellNonce || ciphertext)."""

    code = "cell_id_mismatch"


class DecryptError(VerificationFailed):
    """AEAD decryption failed, or the plaintext is not a sealed payload."""

    code = "decrypt_failed"


class CapabilityError(Unauthenticated):
    """A capability token that is malformed, wrongly signed or expired (401)."""

    code = "unauthenticated"
