"""JSON forms of public log objects: receipts and checkpoint verifier keys.

Bytes become text only here (STYLE.md "Bytes inside, text at the edges"): ids, nonces and
signatures as lowercase hex, leaves and CBOR as standard base64, and every integer that can
exceed 2^53 - 1 (timestamps, epochs, weights, expiries) as a decimal string
(saihm-protocol "Request and response").
"""

from __future__ import annotations

import base64
from typing import Any

from saihm.errors import VerificationFailed
from saihm.events import Operation, Receipt

__all__ = ["receipt_entry", "receipt_json", "verifier_key_json"]

#: C2SP signed-note signature types of the log's checkpoint keys (DESIGN.md "HTTP").
SIGNATURE_TYPES = {0x01: "Ed25519", 0x06: "ML-DSA-44"}


def b64(data: bytes) -> str:
    """Standard base64 with padding (RFC 4648 §4)."""
    return base64.b64encode(data).decode("ascii")


def _detail_json(receipt: Receipt) -> object:
    if receipt.detail is None:
        return None
    if receipt.operation == Operation.KEY:
        return receipt.public_key.hex()
    mapping = receipt.detail_map() or {}
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, bool) or value is None or isinstance(value, str):
            out[key] = value
        elif isinstance(value, int):
            out[key] = str(value)
        elif isinstance(value, list | tuple):
            out[key] = list(value)
        else:
            out[key] = value
    return out


def receipt_json(leaf: bytes) -> dict[str, Any]:
    """The JSON form of the receipt stored as a log leaf.

    ``{"receiptId", "subjectId", "operation", "holderId", "timestamp", "receiptNonce",
    "signature", "detail"}``; detail is the public key in hex for KEY, the detail map (numbers
    as decimal strings) for PROPOSE, VOTE and GRANT, and null otherwise. Raises
    :class:`VerificationFailed` if the stored leaf is not a receipt.
    """
    try:
        receipt = Receipt.from_cbor(leaf)
    except Exception as err:  # DecodeError or pydantic's ValidationError
        raise VerificationFailed("a stored leaf is not a receipt") from err
    return {
        "receiptId": receipt.receipt_id.hex(),
        "subjectId": receipt.subject_id.hex(),
        "operation": receipt.operation.value,
        "holderId": receipt.holder_id.hex(),
        "timestamp": str(receipt.timestamp),
        "receiptNonce": receipt.receipt_nonce.hex(),
        "signature": receipt.signature.hex(),
        "detail": _detail_json(receipt),
    }


def receipt_entry(index: int, leaf: bytes) -> dict[str, Any]:
    """``{"index", "receipt": {...JSON form...}, "cbor": base64}`` (DESIGN.md "HTTP")."""
    return {"index": index, "receipt": receipt_json(leaf), "cbor": b64(leaf)}


def verifier_key_json(vkey: str) -> dict[str, Any]:
    """One checkpoint verifier key: its signed-note form, name, type and algorithm."""
    from saihm.translog.note import parse_vkey

    name, key_id, sig_type, _ = parse_vkey(vkey)
    return {
        "vkey": vkey,
        "name": name,
        "keyId": key_id.hex(),
        "type": sig_type,
        "algorithm": SIGNATURE_TYPES.get(sig_type, "unknown"),
    }
