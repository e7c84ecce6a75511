"""Check 1 of the verifier, one leaf at a time: encoding, receipt id, repeats, holder key.

Shared by the bundle verifier (``verifier.py``, the leaves of a bundle in memory) and the
mirror (``mirror.py``, leaves streamed from entry bundles, the holder keys and receipt ids kept
on disk), so both apply exactly the same rules (saihm-protocol "Wire formats", "Audit log"):

- the leaf is the strict, deterministic CBOR encoding of a receipt;
- its receiptId is SHA-256 of its signed bytes, and no receiptId repeats an earlier leaf;
- its holder has an earlier KEY receipt, or it is that KEY receipt and holderId is SHA-256 of
  the public key it carries; a second KEY receipt for a holder must carry the same key.

A leaf that passes yields the signature job of check 2 (``sigcheck.Job``); one that fails is
recorded in the report and yields nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import MutableMapping

from saihm.audit.report import Report
from saihm.audit.sigcheck import Job
from saihm.errors import SaihmError
from saihm.events import (
    RECEIPT_CONTEXT,
    Operation,
    Receipt,
    holder_id_of,
    receipt_signed_bytes,
)

__all__ = ["LeafChecker"]


class LeafChecker:
    """Applies check 1 to leaves given in log order; remembers holder keys and receipt ids.

    ``keys`` (holderId → ML-DSA-65 public key) and ``seen`` (receiptId → leaf index) may be any
    mutable mappings: dictionaries for a bundle, on-disk maps for a mirror that resumes.
    """

    def __init__(
        self,
        report: Report,
        keys: MutableMapping[bytes, bytes] | None = None,
        seen: MutableMapping[bytes, int] | None = None,
    ) -> None:
        self.report = report
        self.keys: MutableMapping[bytes, bytes] = {} if keys is None else keys
        self.seen: MutableMapping[bytes, int] = {} if seen is None else seen

    def check(self, index: int, leaf: bytes) -> tuple[Receipt, Job] | None:
        """Check leaf ``index``; return the receipt and its signature job, or None (recorded)."""
        report = self.report
        try:
            # Strict: decode() re-encodes and compares, so the leaf is the deterministic
            # encoding of exactly the receipt's fields (codec.py, RFC 8949 §4.2.1).
            receipt = Receipt.from_cbor(leaf)
        except SaihmError as err:
            report.fail("encoding", f"not a strictly encoded receipt: {short(err)}", index)
            return None
        signed = signed_bytes(leaf, receipt)
        if hashlib.sha256(signed).digest() != receipt.receipt_id:
            report.fail("receipt id", "receiptId is not SHA-256 of the signed receipt", index)
            return None
        earlier = self.seen.get(receipt.receipt_id)
        if earlier is not None:
            report.fail("receipt id", f"receipt repeats leaf {earlier}", index)
            return None
        self.seen[receipt.receipt_id] = index
        holder = receipt.holder_id
        public_key = self.keys.get(holder)
        if receipt.operation == Operation.KEY and public_key is None:
            public_key = receipt.public_key
            if holder_id_of(public_key) != holder:
                report.fail("key", "KEY receipt's holderId is not SHA-256 of its key", index)
                return None
            self.keys[holder] = public_key
        elif receipt.operation == Operation.KEY and receipt.detail != public_key:
            report.fail("key", "a second KEY receipt names a different key", index)
            return None
        if public_key is None:
            report.fail("key", f"holder {holder.hex()[:16]}… has no earlier KEY receipt", index)
            return None
        report.receipts += 1
        return receipt, (index, public_key, signed, receipt.signature, RECEIPT_CONTEXT)


_ID_ITEM = b"\x01\x58\x20"  # key 1, byte string of 32
_SIG_HEAD = b"\x05\x59\x0c\xed"  # key 5, byte string of 3309


def signed_bytes(leaf: bytes, receipt: Receipt) -> bytes:
    """The receipt's signed bytes (its map without keys 1 and 5), cut from the strict leaf.

    In a deterministic encoding keys 1 and 5 are single items at known places, so removing
    them and lowering the map's item count equals re-encoding the smaller map (checked against
    ``receipt_signed_bytes`` by the tests); anything unexpected falls back to re-encoding.
    """
    sig_at = leaf.find(_SIG_HEAD + receipt.signature)
    if leaf[1:4] != _ID_ITEM or sig_at < 0 or not 0xA7 <= leaf[0] <= 0xB7:
        return receipt_signed_bytes(receipt)
    end = sig_at + len(_SIG_HEAD) + len(receipt.signature)
    return bytes([leaf[0] - 2]) + leaf[36:sig_at] + leaf[end:]


def short(err: BaseException) -> str:
    """The first line of an error's message, at most 200 characters."""
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:200]
