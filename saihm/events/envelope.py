"""The encryption envelope (saihm-protocol "Encryption envelope", "Cell shape").

For each cell: a fresh random 32-byte DEK and 16-byte cellNonce from ``os.urandom`` (never
derived from the holder seed, the identity key or any other long-lived secret, so that
destroying the wrapped DEK is cryptographic erasure); AES-256-GCM with IV = the first 12 bytes
of cellNonce and no associated data; cellId = SHA-256(kekVersion_be32 || cellNonce ||
ciphertext); the cell signed with context "SAIHM-CELL-v1". Wrapping the DEK is the keyring's job.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from saihm.errors import MalformedInput, rejects, require_type
from saihm.events.errors import CellIdError, DecodeError, DecryptError
from saihm.events.identity import HolderKey
from saihm.events.models import Cell, Operation, Receipt, SealedPayload
from saihm.events.signing import (
    CELL_CONTEXT,
    RECEIPT_CONTEXT,
    cell_message,
    check_holder_binding,
    draft_receipt,
    identified_receipt,
    receipt_signed_bytes,
    verify_signature,
)

__all__ = [
    "DEK_BYTES",
    "NONCE_BYTES",
    "check_cell_id",
    "compute_cell_id",
    "decrypt",
    "decrypt_bytes",
    "encrypt_bytes",
    "new_cell_nonce",
    "new_dek",
    "open_cell",
    "seal",
    "seal_bytes",
    "seal_with_receipt",
    "verify_cell_signature",
]

DEK_BYTES = 32
NONCE_BYTES = 16


def new_dek() -> bytes:
    """A fresh 32-byte DEK from the operating system's random source."""
    return os.urandom(DEK_BYTES)


def new_cell_nonce() -> bytes:
    """A fresh 16-byte cellNonce from the operating system's random source."""
    return os.urandom(NONCE_BYTES)


@rejects()
def compute_cell_id(kek_version: int, cell_nonce: bytes, ciphertext: bytes) -> bytes:
    """cellId = SHA-256(kekVersion_be32 || cellNonce || ciphertext)."""
    return hashlib.sha256(struct.pack(">I", kek_version) + cell_nonce + ciphertext).digest()


@rejects()
def encrypt_bytes(plaintext: bytes, dek: bytes, cell_nonce: bytes) -> bytes:
    """AES-256-GCM of ``plaintext``, IV = cellNonce[:12], no AAD; returns ciphertext || tag."""
    if len(dek) != DEK_BYTES or len(cell_nonce) != NONCE_BYTES:
        raise MalformedInput("a DEK is 32 bytes and a cellNonce 16 bytes")
    return AESGCM(dek).encrypt(cell_nonce[:12], plaintext, None)


@rejects()
def decrypt_bytes(ciphertext: bytes, dek: bytes, cell_nonce: bytes) -> bytes:
    """Inverse of ``encrypt_bytes``; raises ``DecryptError`` if the tag does not verify."""
    if len(dek) != DEK_BYTES or len(cell_nonce) != NONCE_BYTES:
        raise DecryptError("a DEK is 32 bytes and a cellNonce 16 bytes")
    try:
        return AESGCM(dek).decrypt(cell_nonce[:12], ciphertext, None)
    except InvalidTag as err:
        raise DecryptError("AES-256-GCM tag does not verify") from err


@rejects()
def seal_bytes(
    plaintext: bytes,
    *,
    dek: bytes,
    cell_nonce: bytes,
    key: HolderKey,
    kek_version: int,
    tier: str,
    timestamp: int,
) -> Cell:
    """Encrypt raw ``plaintext`` under a given DEK and nonce, then identify and sign the cell.

    This is the protocol's example construction; production code calls ``seal``, which draws
    the DEK and nonce itself. The caller MUST NOT reuse a (DEK, nonce) pair.
    """
    cell, _ = _sealed(plaintext, dek, cell_nonce, key, kek_version, tier, timestamp, None)
    return cell


def _sealed(
    plaintext: bytes,
    dek: bytes,
    cell_nonce: bytes,
    key: HolderKey,
    kek_version: int,
    tier: str,
    timestamp: int,
    operation: Operation | None,
) -> tuple[Cell, Receipt | None]:
    """Encrypt, identify and sign the cell; with ``operation``, also the receipt of that
    operation on it at the same timestamp, both signatures made at once
    (:meth:`HolderKey.sign_all`)."""
    ciphertext = encrypt_bytes(plaintext, dek, cell_nonce)
    cell_id = compute_cell_id(kek_version, cell_nonce, ciphertext)
    to_sign = [(cell_message(cell_id, key.holder_id, kek_version, timestamp), CELL_CONTEXT)]
    receipt = signed = None
    if operation is not None:
        receipt = draft_receipt(
            key.holder_id, subject_id=cell_id, operation=operation, timestamp=timestamp
        )
        signed = receipt_signed_bytes(receipt)
        to_sign.append((signed, RECEIPT_CONTEXT))
    signatures = key.sign_all(to_sign)
    cell = Cell(
        cell_id=cell_id,
        holder_id=key.holder_id,
        kek_version=kek_version,
        tier=tier,
        cell_nonce=cell_nonce,
        ciphertext=ciphertext,
        signature=signatures[0],
        timestamp=timestamp,
    )
    if receipt is None or signed is None:
        return cell, None
    return cell, identified_receipt(receipt, signed, signatures[1])


@rejects()
def seal(
    payload: SealedPayload, *, key: HolderKey, kek_version: int, tier: str, timestamp: int
) -> tuple[Cell, bytes]:
    """Seal ``payload`` into a new signed cell under a fresh random DEK and cellNonce.

    Returns ``(cell, dek)``; the caller wraps the DEK under the current KEK generation
    ``kek_version`` and then forgets it.
    """
    dek = new_dek()
    cell = seal_bytes(
        payload.to_cbor(),
        dek=dek,
        cell_nonce=new_cell_nonce(),
        key=key,
        kek_version=kek_version,
        tier=tier,
        timestamp=timestamp,
    )
    return cell, dek


@rejects()
def seal_with_receipt(
    payload: SealedPayload,
    *,
    key: HolderKey,
    kek_version: int,
    tier: str,
    timestamp: int,
    operation: Operation = Operation.REMEMBER,
) -> tuple[Cell, bytes, Receipt]:
    """:func:`seal`, and the receipt of ``operation`` on the new cell at the same timestamp,
    with their two signatures made at once (:meth:`HolderKey.sign_all`: on two threads when
    no other such call is under way). Returns ``(cell, dek, receipt)``; the bytes are those
    ``seal`` and :func:`~saihm.events.signing.sign_receipt` make one after the other."""
    dek = new_dek()
    cell, receipt = _sealed(
        payload.to_cbor(), dek, new_cell_nonce(), key, kek_version, tier, timestamp, operation
    )
    assert receipt is not None  # an operation was given
    return cell, dek, receipt


@rejects()
def check_cell_id(cell: Cell) -> None:
    """Raise ``CellIdError`` unless the stored cellId matches (saihm-protocol "Cell shape")."""
    require_type(cell, Cell, "check_cell_id: cell")
    want = compute_cell_id(cell.kek_version, cell.cell_nonce, cell.ciphertext)
    if not hmac.compare_digest(want, cell.cell_id):
        raise CellIdError("stored cellId does not match the cell")


@rejects()
def verify_cell_signature(cell: Cell, public_key: bytes) -> None:
    """Check the holderId binding and the cell signature; raises ``SignatureError``."""
    check_holder_binding(cell.holder_id, public_key, "cell")
    message = cell_message(cell.cell_id, cell.holder_id, cell.kek_version, cell.timestamp)
    verify_signature(public_key, cell.signature, message, CELL_CONTEXT)


@rejects()
def decrypt(cell: Cell, dek: bytes) -> SealedPayload:
    """Decrypt a cell already checked by the caller; raises ``DecryptError``.

    Prefer ``open_cell``, which checks cellId and signature first as the protocol requires.
    """
    plaintext = decrypt_bytes(cell.ciphertext, dek, cell.cell_nonce)
    try:
        # The GCM tag just authenticated these bytes as ones sealed under this cell's DEK.
        return SealedPayload.from_cbor(plaintext, authenticated=True)
    except DecodeError as err:
        raise DecryptError("decrypted cell is not a sealed payload") from err


@rejects()
def open_cell(cell: Cell, dek: bytes, public_key: bytes) -> SealedPayload:
    """Check cellId, then the signature, then decrypt (saihm-protocol "Encryption envelope").

    Raises ``CellIdError``, ``SignatureError`` or ``DecryptError`` (all ``VerificationFailed``).
    """
    check_cell_id(cell)
    verify_cell_signature(cell, public_key)
    return decrypt(cell, dek)
