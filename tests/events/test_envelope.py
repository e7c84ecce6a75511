"""The encryption envelope (saihm-protocol "Encryption envelope", "Erasure properties")."""

from __future__ import annotations

import hashlib
import os

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from saihm.errors import MalformedInput
from saihm.events import (
    CellIdError,
    DecryptError,
    SealedPayload,
    SignatureError,
    check_cell_id,
    check_contract_rules,
    derive_identity_key,
    open_cell,
    seal,
    sign_contract,
)
from saihm.events import envelope as envelope_module
from saihm.events.envelope import compute_cell_id

NOW = 1747526400


def _payload(text="remember this"):
    return SealedPayload(content=text, session_id=b"\x01" * 32, namespace="memory", kind="memory")


def test_seal_then_open(holder):
    cell, dek = seal(_payload(), key=holder, kek_version=9, tier="STANDARD", timestamp=NOW)
    assert cell.kek_version == 9 and cell.holder_id == holder.holder_id
    assert cell.cell_id == compute_cell_id(9, cell.cell_nonce, cell.ciphertext)
    assert open_cell(cell, dek, holder.public_key) == _payload()


def test_same_plaintext_twice_gives_two_cell_ids(holder):
    a, _ = seal(_payload(), key=holder, kek_version=1, tier="STANDARD", timestamp=NOW)
    b, _ = seal(_payload(), key=holder, kek_version=1, tier="STANDARD", timestamp=NOW)
    assert a.cell_id != b.cell_id and a.cell_nonce != b.cell_nonce


def test_cell_id_mismatch_is_refused_before_decrypting(holder, monkeypatch):
    """ "MUST refuse to serve a cell whose stored cellId does not match"; checked first."""
    cell, dek = seal(_payload(), key=holder, kek_version=1, tier="STANDARD", timestamp=NOW)
    called = []
    monkeypatch.setattr(envelope_module, "decrypt", lambda *a: called.append(a))
    # Flip a bit: setting the last byte to zero left it as it was once in 256 runs.
    flipped = cell.ciphertext[:-1] + bytes([cell.ciphertext[-1] ^ 1])
    bad = cell.model_copy(update={"ciphertext": flipped})
    with pytest.raises(CellIdError):
        check_cell_id(bad)
    with pytest.raises(CellIdError):
        open_cell(bad, dek, holder.public_key)
    other_kek = cell.model_copy(update={"kek_version": 2})
    with pytest.raises(CellIdError):
        open_cell(other_kek, dek, holder.public_key)
    assert called == []


def test_signature_checked_before_decrypting(holder, other_holder, monkeypatch):
    cell, dek = seal(_payload(), key=holder, kek_version=1, tier="STANDARD", timestamp=NOW)
    called = []
    monkeypatch.setattr(envelope_module, "decrypt", lambda *a: called.append(a))
    with pytest.raises(SignatureError):
        open_cell(cell.model_copy(update={"timestamp": NOW + 1}), dek, holder.public_key)
    with pytest.raises(SignatureError):
        open_cell(cell, dek, other_holder.public_key)
    assert called == []


def test_wrong_dek_fails_decryption(holder):
    cell, _ = seal(_payload(), key=holder, kek_version=1, tier="STANDARD", timestamp=NOW)
    with pytest.raises(DecryptError):
        open_cell(cell, os.urandom(32), holder.public_key)


def test_dek_is_random_and_not_derived_from_holder_secrets(holder):
    """ "The DEK ... MUST NOT be derivable from identityKey, from the holder seed, or from any
    other long-lived secret." Structural check: DEKs differ across cells of one holder, and
    none equals the seed, the identity key's halves or HKDF outputs of the seed."""
    seed = bytes(range(32))  # the `holder` fixture's seed
    ik = derive_identity_key(seed)
    derived = {seed, ik[:32], ik[32:], hashlib.sha256(seed).digest()}
    for salt in (None, b"MPS-PQC-KEY-GEN-v1", b"SAIHM"):
        for info in (b"", b"MPS-AGENT-IDENTITY-v1", b"SAIHM-DEK-v1", b"dek"):
            for ikm in (seed, ik):
                out = HKDF(hashes.SHA256(), 64, salt, info).derive(ikm)
                derived |= {out[:32], out[32:]}
    deks = set()
    for _ in range(64):
        _cell, dek = seal(_payload(), key=holder, kek_version=1, tier="STANDARD", timestamp=NOW)
        assert len(dek) == 32
        deks.add(dek)
    assert len(deks) == 64
    assert not deks & derived


def test_dek_comes_from_os_urandom(holder, monkeypatch):
    calls = []
    real = os.urandom

    def spy(n):
        calls.append(n)
        return real(n)

    monkeypatch.setattr(envelope_module.os, "urandom", spy)
    seal(_payload(), key=holder, kek_version=1, tier="STANDARD", timestamp=NOW)
    assert calls[:2] == [32, 16]


@pytest.mark.parametrize(
    ("terms", "code"),
    [
        ({"grantee_ids": [b"\x03" * 32, b"\x03" * 32]}, "invalid_grantee"),
        ({"mode": "FOREVER"}, "invalid_mode"),
        ({"scope": "write"}, "invalid_scope"),
        ({"scope": "readwrite"}, "invalid_scope"),
        ({"expires_at": NOW}, "invalid_expiry"),
        ({"expires_at": NOW + 86401}, "invalid_expiry"),
        ({"mode": "PERMANENT", "expires_at": NOW + 5}, "invalid_expiry"),
        ({"mode": "SYNDICATE", "expires_at": NOW - 5}, "invalid_expiry"),
    ],
)
def test_contract_rules(holder, terms, code):
    base = {
        "grantee_ids": [b"\x03" * 32],
        "shard_ids": [b"\x04" * 32],
        "mode": "TEMPORARY",
        "scope": "read",
        "expires_at": NOW + 86400,
        "timestamp": NOW,
    }
    check_contract_rules(sign_contract(holder, **base), NOW)
    contract = sign_contract(holder, **(base | terms))
    with pytest.raises(MalformedInput) as err:
        check_contract_rules(contract, NOW)
    assert err.value.code == code
