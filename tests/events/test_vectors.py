"""saihm-protocol "Example values": every value reproduced exactly."""

from __future__ import annotations

import hashlib

from dilithium_py.ml_dsa import ML_DSA_65
from pqcrypto.sign.ml_dsa_65 import verify as pq_verify

from saihm.events import CELL_CONTEXT, HolderKey, cell_message, derive_identity_key, seal_bytes
from saihm.events.envelope import decrypt_bytes
from saihm.events.signing import verify_signature


def test_holder_seed_is_sha256_of_the_label(example):
    assert hashlib.sha256(example.seedLabel.encode("ascii")).digest() == example.holderSeed
    assert len(example.seedLabel) == 46


def test_identity_key(example):
    assert derive_identity_key(example.holderSeed) == example.identityKey


def test_holder_id(example):
    key = HolderKey.from_seed(example.holderSeed)
    assert key.holder_id == example.holderId
    assert hashlib.sha256(key.public_key).digest() == example.holderId


def test_ciphertext_and_cell_id(example):
    key = HolderKey.from_seed(example.holderSeed)
    assert example.plaintext.decode("ascii") == example.plaintextAscii
    cell = seal_bytes(
        example.plaintext,
        dek=example.dek,
        cell_nonce=example.cellNonce,
        key=key,
        kek_version=example.kekVersion,
        tier="STANDARD",
        timestamp=example.timestamp,
    )
    assert len(cell.ciphertext) == 57
    assert cell.ciphertext == example.ciphertext
    assert cell.cell_id == example.cellId
    assert decrypt_bytes(cell.ciphertext, example.dek, example.cellNonce) == example.plaintext
    # "A hedged signature verifies the same way but is not reproducible."
    message = cell_message(cell.cell_id, cell.holder_id, cell.kek_version, cell.timestamp)
    pq_verify(key.public_key, message, cell.signature, context=CELL_CONTEXT)


def test_deterministic_signature_prefix(example):
    xi = example.identityKey[:32]
    pk, sk = ML_DSA_65.key_derive(xi)
    assert hashlib.sha256(pk).digest() == example.holderId
    message = cell_message(example.cellId, example.holderId, example.kekVersion, example.timestamp)
    sig = ML_DSA_65.sign(sk, message, ctx=example.signatureContext.encode(), deterministic=True)
    assert len(sig) == example.signatureLength
    assert sig[:32] == example.deterministicSignaturePrefix
    # The deterministic signature verifies with saihm's verifier and with pqcrypto.
    assert HolderKey.from_seed(example.holderSeed).public_key == pk
    verify_signature(pk, sig, message, CELL_CONTEXT)
    pq_verify(pk, message, sig, context=CELL_CONTEXT)
