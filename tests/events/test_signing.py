"""Signed messages (saihm-protocol "Signed messages"): second-implementation verification,
single-byte tampering, ids computed from the signed bytes, and mutated encodings."""

from __future__ import annotations

import hashlib
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pqcrypto.sign.ml_dsa_65 import verify as pq_verify

from saihm.errors import VerificationFailed
from saihm.events import (
    CAPABILITY_CONTEXT,
    CELL_CONTEXT,
    CONTRACT_CONTEXT,
    RECEIPT_CONTEXT,
    Capability,
    CapabilityError,
    CapabilityScope,
    Cell,
    Contract,
    DecodeError,
    GrantDetail,
    Operation,
    ProposeDetail,
    Receipt,
    SealedPayload,
    SignatureError,
    VoteDetail,
    cell_message,
    check_cell_id,
    receipt_signed_bytes,
    seal,
    sign_capability,
    sign_contract,
    sign_receipt,
    verify_capability,
    verify_cell_signature,
    verify_contract,
    verify_receipt,
)
from saihm.events.signing import (
    capability_signed_bytes,
    contract_signed_bytes,
    verify_signature,
)

NOW = 1747526400
STRIDE = 97  # positions 0, 97, 194, ... plus the last byte: a fast, even sample


def _positions(n: int) -> list[int]:
    return sorted({*range(0, n, STRIDE), n - 1})


def _flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1 :]


def _rejected_by_both(pk: bytes, msg: bytes, sig: bytes, ctx: bytes) -> None:
    with pytest.raises(SignatureError):
        verify_signature(pk, sig, msg, ctx)
    with pytest.raises(Exception):  # noqa: B017 - pqcrypto raises its own error type
        pq_verify(pk, msg, sig, context=ctx)


@pytest.fixture(scope="module")
def signed(holder, authority):
    """One of every kind of signature the project makes: (public key, message, sig, context)."""
    payload = SealedPayload(
        content="hi", session_id=b"\x01" * 32, namespace="memory", kind="memory"
    )
    cell, _dek = seal(payload, key=holder, kek_version=1, tier="STANDARD", timestamp=NOW)
    out = {
        "cell": (
            holder.public_key,
            cell_message(cell.cell_id, cell.holder_id, cell.kek_version, cell.timestamp),
            cell.signature,
            CELL_CONTEXT,
        )
    }
    details = {
        Operation.KEY: holder.public_key,
        Operation.PROPOSE: ProposeDetail(
            scope="emission_param", param_key="k", proposed_value="v", snapshot_epoch=NOW
        ),
        Operation.VOTE: VoteDetail(approve=False, weight=7),
        Operation.GRANT: GrantDetail(namespaces=("memory",), expires_at=NOW + 60),
    }
    for op in Operation:
        r = sign_receipt(
            holder, subject_id=b"\x02" * 32, operation=op, timestamp=NOW, detail=details.get(op)
        )
        out[f"receipt-{op.value}"] = (
            holder.public_key,
            receipt_signed_bytes(r),
            r.signature,
            RECEIPT_CONTEXT,
        )
    c = sign_contract(
        holder,
        grantee_ids=[b"\x03" * 32],
        shard_ids=[cell.cell_id],
        mode="TEMPORARY",
        scope="read",
        expires_at=NOW + 3600,
        timestamp=NOW,
    )
    out["contract"] = (holder.public_key, contract_signed_bytes(c), c.signature, CONTRACT_CONTEXT)
    cap = sign_capability(
        authority,
        holder_id=holder.holder_id,
        session_id=b"\x04" * 32,
        scope=CapabilityScope(),
        expires_at=NOW + 60,
    )
    out["capability"] = (
        authority.public_key,
        capability_signed_bytes(cap),
        cap.signature,
        CAPABILITY_CONTEXT,
    )
    return out


KINDS = ["cell", *[f"receipt-{op.value}" for op in Operation], "contract", "capability"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_signature_verifies_with_pqcrypto(signed, kind):
    pk, msg, sig, ctx = signed[kind]
    assert len(sig) == 3309
    pq_verify(pk, msg, sig, context=ctx)
    verify_signature(pk, sig, msg, ctx)


@pytest.mark.parametrize("kind", ["cell", "receipt-KEY", "receipt-VOTE", "contract", "capability"])
def test_any_single_byte_change_fails(signed, kind):
    pk, msg, sig, ctx = signed[kind]
    for pos in _positions(len(msg)):
        _rejected_by_both(pk, _flip(msg, pos), sig, ctx)
    for pos in range(len(ctx)):
        _rejected_by_both(pk, msg, sig, _flip(ctx, pos))
    for pos in _positions(len(sig)):
        _rejected_by_both(pk, msg, _flip(sig, pos), ctx)


@pytest.mark.parametrize("kind", ["cell", "receipt-REMEMBER", "contract", "capability"])
def test_a_signature_under_one_context_is_not_valid_under_another(signed, kind):
    pk, msg, sig, ctx = signed[kind]
    for other in (CELL_CONTEXT, RECEIPT_CONTEXT, CONTRACT_CONTEXT, CAPABILITY_CONTEXT):
        if other != ctx:
            _rejected_by_both(pk, msg, sig, other)


def test_receipt_id_is_sha256_of_the_signed_bytes(holder):
    r = sign_receipt(holder, subject_id=b"\x02" * 32, operation="FORGET", timestamp=NOW)
    signed = receipt_signed_bytes(r)
    assert r.receipt_id == hashlib.sha256(signed).digest()
    decoded = __import__("saihm.events", fromlist=["decode"]).decode(signed)
    assert set(decoded) == {2, 3, 4, 6, 8}  # "without keys 1 (receiptId) and 5 (signature)"
    verify_receipt(r, holder.public_key)


def test_receipt_nonce_makes_identical_receipts_distinct(holder):
    a = sign_receipt(holder, subject_id=b"\x02" * 32, operation="STATUS", timestamp=NOW)
    b = sign_receipt(holder, subject_id=b"\x02" * 32, operation="STATUS", timestamp=NOW)
    assert a.receipt_nonce != b.receipt_nonce and a.receipt_id != b.receipt_id


def test_receipt_checked_against_another_holders_key_fails(holder, other_holder):
    r = sign_receipt(holder, subject_id=b"\x02" * 32, operation="REMEMBER", timestamp=NOW)
    with pytest.raises(SignatureError):
        verify_receipt(r, other_holder.public_key)


def test_contract_id_and_nonce(holder):
    c = sign_contract(
        holder,
        grantee_ids=[b"\x03" * 32],
        shard_ids=[b"\x04" * 32],
        mode="PERMANENT",
        scope="read",
        expires_at=0,
        timestamp=NOW,
        contract_nonce=b"\x0a" * 16,
    )
    assert c.contract_id == hashlib.sha256(contract_signed_bytes(c)).digest()
    assert 10 in __import__("saihm.events", fromlist=["decode"]).decode(contract_signed_bytes(c))
    verify_contract(c, holder.public_key)


def test_capability_expiry_and_authority(holder, authority):
    cap = sign_capability(
        authority,
        holder_id=holder.holder_id,
        session_id=b"\x04" * 32,
        scope=CapabilityScope(),
        expires_at=NOW + 60,
    )
    verify_capability(Capability.from_token(cap.to_token()), authority.public_key, NOW + 59)
    with pytest.raises(CapabilityError) as err:
        verify_capability(cap, authority.public_key, NOW + 60)
    assert err.value.code == "token_expired" and err.value.status == 401
    # A holder key is not the authority.
    with pytest.raises(CapabilityError):
        verify_capability(cap, holder.public_key, NOW)


@pytest.mark.parametrize("token", ["", "!!!", "A", "AAAA", "A" * 9000, "QQ==", "QR"])
def test_malformed_tokens_are_unauthenticated(token):
    with pytest.raises(CapabilityError):
        Capability.from_token(token)


# Mutated encodings: rejected, or decoding to something whose check fails -----------------------


@pytest.fixture(scope="module")
def objects(holder, authority):
    payload = SealedPayload(content="hi", session_id=b"\x01" * 32, namespace="memory", kind="said")
    cell, _ = seal(payload, key=holder, kek_version=3, tier="STANDARD", timestamp=NOW)
    receipt = sign_receipt(
        holder,
        subject_id=b"\x02" * 32,
        operation="VOTE",
        timestamp=NOW,
        detail=VoteDetail(approve=True, weight=5),
    )
    contract = sign_contract(
        holder,
        grantee_ids=[b"\x03" * 32, b"\x05" * 32],
        shard_ids=[cell.cell_id],
        mode="SYNDICATE",
        scope="read",
        expires_at=0,
        timestamp=NOW,
    )
    cap = sign_capability(
        authority,
        holder_id=holder.holder_id,
        session_id=None,
        scope=CapabilityScope(sessions="all", namespaces=("memory",), grant_id=b"\x06" * 32),
        expires_at=NOW + 60,
    )

    def check_cell(c):
        check_cell_id(c)
        verify_cell_signature(c, holder.public_key)

    return {
        "cell": (Cell, cell, check_cell),
        "receipt": (Receipt, receipt, lambda r: verify_receipt(r, holder.public_key)),
        "contract": (Contract, contract, lambda c: verify_contract(c, holder.public_key)),
        "capability": (
            Capability,
            cap,
            lambda c: verify_capability(c, authority.public_key, NOW),
        ),
    }


@pytest.mark.parametrize("kind", ["cell", "receipt", "contract", "capability"])
def test_mutated_encoding_is_rejected_or_fails_verification(objects, kind):
    model, obj, check = objects[kind]
    data = obj.to_cbor()
    check(obj)

    @settings(max_examples=60, deadline=None)
    @given(st.data())
    def run(draw):
        how = draw.draw(st.sampled_from(["flip", "truncate", "insert"]))
        pos = draw.draw(st.integers(0, len(data) - 1))
        if how == "flip":
            mutated = (
                data[:pos] + bytes([data[pos] ^ draw.draw(st.integers(1, 255))]) + data[pos + 1 :]
            )
        elif how == "truncate":
            mutated = data[:pos]
        else:
            mutated = data[:pos] + os.urandom(1) + data[pos:]
        try:
            decoded = model.from_cbor(mutated)
        except DecodeError:
            return
        if kind == "cell" and decoded.model_copy(update={"tier": obj.tier}) == obj:
            # The cell signature covers cellId || holderId || kekVersion || timestamp and the
            # cellId covers kekVersion || cellNonce || ciphertext (saihm-protocol "Signed
            # messages"): the tier is unsigned placement metadata, so a changed tier is the one
            # mutation that verifies. Everything that is signed must still be identical.
            check(decoded)
            return
        with pytest.raises((VerificationFailed, CapabilityError)):
            check(decoded)

    run()
