"""Signed messages (saihm-protocol "Signed messages") and capability signing.

Every signature is pure ML-DSA-65 with a context string naming what is signed:

- cell, "SAIHM-CELL-v1": cellId || holderId || kekVersion_be32 || timestamp_be64;
- receipt, "SAIHM-RECEIPT-v1": deterministic CBOR of the receipt map without keys 1 and 5;
  receiptId = SHA-256 of the same bytes;
- contract, "SAIHM-CONTRACT-v1": deterministic CBOR of the contract map without keys 1 and 9
  (key 10 included); contractId = SHA-256 of the same bytes;
- capability, "SAIHM-CAPABILITY-v1": deterministic CBOR of the capability map without key 6,
  signed by the authority key (DESIGN.md "Capabilities").

Verification raises and never returns a bool. Every verify function also checks that the
holderId named in the object is SHA-256 of the public key it is checked against.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Sequence

from saihm.errors import MalformedInput, rejects, require_type
from saihm.events.capability import Capability, CapabilityScope
from saihm.events.codec import encode
from saihm.events.errors import CapabilityError, SignatureError
from saihm.events.identity import AuthorityKey, HolderKey, holder_id_of
from saihm.events.models import Contract, Detail, Operation, Receipt
from saihm.mldsa import MLDSA65_SIGNATURE_SIZE, InvalidSignature, mldsa65_verify

__all__ = [
    "CAPABILITY_CONTEXT",
    "CELL_CONTEXT",
    "CONTRACT_CONTEXT",
    "RECEIPT_CONTEXT",
    "capability_signed_bytes",
    "cell_message",
    "check_holder_binding",
    "contract_signed_bytes",
    "draft_receipt",
    "identified_receipt",
    "receipt_signed_bytes",
    "sign_capability",
    "sign_contract",
    "sign_receipt",
    "verify_capability",
    "verify_contract",
    "verify_receipt",
    "verify_signature",
]

CELL_CONTEXT = b"SAIHM-CELL-v1"
RECEIPT_CONTEXT = b"SAIHM-RECEIPT-v1"
CONTRACT_CONTEXT = b"SAIHM-CONTRACT-v1"
CAPABILITY_CONTEXT = b"SAIHM-CAPABILITY-v1"

# Stand-ins of the shapes the models require, so that a draft is validated once before the
# bytes it signs are known; the id and the signature replace them (``model_copy``).
_UNSET_ID = bytes(32)
_UNSET_SIGNATURE = bytes(MLDSA65_SIGNATURE_SIZE)


@rejects()
def verify_signature(public_key: bytes, signature: bytes, message: bytes, context: bytes) -> None:
    """Check a pure ML-DSA-65 signature; raises ``SignatureError``."""
    try:
        mldsa65_verify(public_key, signature, message, context)
    except InvalidSignature as err:
        raise SignatureError("ML-DSA-65 signature does not verify") from err


@rejects()
def check_holder_binding(holder_id: bytes, public_key: bytes, what: str = "object") -> None:
    """Raise ``SignatureError`` unless ``holder_id`` is SHA-256 of ``public_key``."""
    if not hmac.compare_digest(holder_id_of(public_key), holder_id):
        raise SignatureError(f"{what} names a holderId that is not this public key's")


@rejects()
def cell_message(cell_id: bytes, holder_id: bytes, kek_version: int, timestamp: int) -> bytes:
    """The signed cell message: cellId || holderId || kekVersion_be32 || timestamp_be64."""
    if len(cell_id) != 32 or len(holder_id) != 32:
        raise MalformedInput("cellId and holderId are 32 bytes")
    return cell_id + holder_id + struct.pack(">IQ", kek_version, timestamp)


# Identified objects: receipts and contracts ----------------------------------------------------


def _identify(draft: Receipt | Contract, key: HolderKey, context: bytes) -> tuple[bytes, bytes]:
    """The id (SHA-256 of the signed bytes) and the signature of a validated draft's unsigned
    map under ``key`` and ``context`` (saihm-protocol "Signed messages")."""
    signed = encode(draft.unsigned_map())
    return hashlib.sha256(signed).digest(), key.sign(signed, context)


def _verify_identified(
    signed: bytes,
    identifier: bytes,
    holder_id: bytes,
    signature: bytes,
    public_key: bytes,
    context: bytes,
    what: str,
) -> None:
    """Check the id is SHA-256 of ``signed``, the holder binding, then the signature."""
    if not hmac.compare_digest(hashlib.sha256(signed).digest(), identifier):
        raise SignatureError(f"{what}Id does not match the {what}")
    check_holder_binding(holder_id, public_key, what)
    verify_signature(public_key, signature, signed, context)


# Receipts ------------------------------------------------------------------------------------


@rejects()
def receipt_signed_bytes(receipt: Receipt) -> bytes:
    """The bytes a receipt's signature covers and whose SHA-256 is its receiptId."""
    require_type(receipt, Receipt, "receipt_signed_bytes: receipt")
    return encode(receipt.unsigned_map())


@rejects()
def sign_receipt(
    key: HolderKey,
    *,
    subject_id: bytes,
    operation: Operation | str,
    timestamp: int,
    detail: Detail | None = None,
    receipt_nonce: bytes | None = None,
) -> Receipt:
    """Build, sign and identify a receipt for ``key``'s holder.

    ``receipt_nonce`` defaults to 16 bytes of ``os.urandom``. Raises ``MalformedInput``
    (``InvalidValue``) if a field or the detail does not fit the operation.
    """
    draft = draft_receipt(
        key.holder_id,
        subject_id=subject_id,
        operation=operation,
        timestamp=timestamp,
        detail=detail,
        receipt_nonce=receipt_nonce,
    )
    signed = receipt_signed_bytes(draft)
    return identified_receipt(draft, signed, key.sign(signed, RECEIPT_CONTEXT))


@rejects()
def draft_receipt(
    holder_id: bytes,
    *,
    subject_id: bytes,
    operation: Operation | str,
    timestamp: int,
    detail: Detail | None = None,
    receipt_nonce: bytes | None = None,
) -> Receipt:
    """The receipt :func:`sign_receipt` builds, validated, before its id and signature (both
    zero placeholders); :func:`identified_receipt` completes it."""
    return Receipt(
        receipt_id=_UNSET_ID,
        subject_id=subject_id,
        operation=Operation(operation),
        holder_id=holder_id,
        signature=_UNSET_SIGNATURE,
        timestamp=timestamp,
        receipt_nonce=os.urandom(16) if receipt_nonce is None else receipt_nonce,
        detail=detail,
    )


def identified_receipt(draft: Receipt, signed: bytes, signature: bytes) -> Receipt:
    """``draft`` (from :func:`draft_receipt`) with its receiptId, SHA-256 of ``signed`` (its
    :func:`receipt_signed_bytes`), and ``signature`` over them under RECEIPT_CONTEXT."""
    receipt_id = hashlib.sha256(signed).digest()
    return draft.model_copy(update={"receipt_id": receipt_id, "signature": signature})


@rejects()
def verify_receipt(receipt: Receipt, public_key: bytes) -> None:
    """Check receiptId, the holderId binding and the signature; raises ``SignatureError``."""
    _verify_identified(
        receipt_signed_bytes(receipt),
        receipt.receipt_id,
        receipt.holder_id,
        receipt.signature,
        public_key,
        RECEIPT_CONTEXT,
        "receipt",
    )


# Contracts -----------------------------------------------------------------------------------


@rejects()
def contract_signed_bytes(contract: Contract) -> bytes:
    """The bytes a contract's signature covers and whose SHA-256 is its contractId."""
    return encode(contract.unsigned_map())


@rejects()
def sign_contract(
    key: HolderKey,
    *,
    grantee_ids: Sequence[bytes],
    shard_ids: Sequence[bytes],
    mode: str,
    scope: str,
    expires_at: int,
    timestamp: int,
    contract_nonce: bytes | None = None,
) -> Contract:
    """Build, sign and identify a contract. Structure is checked here; the protocol's rules
    (``saihm.events.rules.check_contract_terms``) are the caller's to apply first."""
    draft = Contract(
        contract_id=_UNSET_ID,
        holder_id=key.holder_id,
        grantee_ids=tuple(grantee_ids),
        shard_ids=tuple(shard_ids),
        mode=mode,
        scope=scope,
        expires_at=expires_at,
        timestamp=timestamp,
        signature=_UNSET_SIGNATURE,
        contract_nonce=os.urandom(16) if contract_nonce is None else contract_nonce,
    )
    contract_id, signature = _identify(draft, key, CONTRACT_CONTEXT)
    return draft.model_copy(update={"contract_id": contract_id, "signature": signature})


@rejects()
def verify_contract(contract: Contract, public_key: bytes) -> None:
    """Check contractId, the holderId binding and the signature; raises ``SignatureError``."""
    _verify_identified(
        contract_signed_bytes(contract),
        contract.contract_id,
        contract.holder_id,
        contract.signature,
        public_key,
        CONTRACT_CONTEXT,
        "contract",
    )


# Capabilities --------------------------------------------------------------------------------


@rejects()
def capability_signed_bytes(cap: Capability) -> bytes:
    """The bytes the authority signs: the capability map without key 6."""
    return encode(cap.unsigned_map())


@rejects()
def sign_capability(
    authority_key: AuthorityKey,
    *,
    holder_id: bytes,
    session_id: bytes | None,
    scope: CapabilityScope,
    expires_at: int,
    token_id: bytes | None = None,
) -> Capability:
    """A capability signed by the authority; ``token_id`` defaults to 16 random bytes."""
    draft = Capability(
        holder_id=holder_id,
        session_id=session_id,
        scope=scope,
        expires_at=expires_at,
        token_id=os.urandom(16) if token_id is None else token_id,
        signature=_UNSET_SIGNATURE,
    )
    signature = authority_key.sign(capability_signed_bytes(draft), CAPABILITY_CONTEXT)
    return draft.model_copy(update={"signature": signature})


@rejects()
def verify_capability(cap: Capability, authority_public_key: bytes, now: int) -> None:
    """Check the authority's signature and that ``now < expires_at``.

    Raises ``CapabilityError`` (401) with code ``invalid_token`` or ``token_expired``.
    Revocation (grant ids, token ids) is the caller's check.
    """
    try:
        verify_signature(
            authority_public_key, cap.signature, capability_signed_bytes(cap), CAPABILITY_CONTEXT
        )
    except SignatureError as err:
        raise CapabilityError("token signature does not verify", code="invalid_token") from err
    if now >= cap.expires_at:
        raise CapabilityError("token has expired", code="token_expired")
