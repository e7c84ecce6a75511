"""Shared fixtures for the events tests: the protocol's example vector and test keys."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from saihm.events import AuthorityKey, HolderKey

VECTORS = Path(__file__).resolve().parent.parent / "vectors"

_HEX = {
    "holderSeed",
    "identityKey",
    "holderId",
    "cellNonce",
    "dek",
    "plaintext",
    "ciphertext",
    "cellId",
    "deterministicSignaturePrefix",
}


def load_vector(name: str) -> SimpleNamespace:
    """Load a vector file, decoding the hexadecimal members to bytes."""
    raw = json.loads((VECTORS / name).read_text())
    return SimpleNamespace(**{k: bytes.fromhex(v) if k in _HEX else v for k, v in raw.items()})


@pytest.fixture(scope="session")
def example() -> SimpleNamespace:
    return load_vector("saihm_example.json")


@pytest.fixture(scope="session")
def holder() -> HolderKey:
    return HolderKey.from_seed(bytes(range(32)))


@pytest.fixture(scope="session")
def other_holder() -> HolderKey:
    return HolderKey.from_seed(bytes(range(1, 33)))


@pytest.fixture(scope="session")
def authority() -> AuthorityKey:
    return AuthorityKey.from_seed(b"\x07" * 32)
