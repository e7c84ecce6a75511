"""One error root: nothing but a ``SaihmError`` escapes a public function of saihm.events.

Hypothesis calls each public decoder, model constructor, signing helper and envelope function
with valid arguments of which any data argument may be replaced by a hostile value. The only
exception allowed out is a ``SaihmError`` (``DecodeError``, ``InvalidValue``, ``SignatureError``,
...): never pydantic's ``ValidationError``, ``ValueError``, ``TypeError``, ``KeyError``, a cbor2
error or ``struct.error``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.errors import MalformedInput, SaihmError
from saihm.events import (
    AuthorityKey,
    Capability,
    CapabilityScope,
    Cell,
    Contract,
    GrantDetail,
    HolderKey,
    Operation,
    Proposal,
    ProposeDetail,
    Receipt,
    SealedPayload,
    VoteDetail,
    cell_message,
    check_cell_id,
    check_contract_rules,
    check_contract_terms,
    compute_cell_id,
    decode,
    decrypt,
    derive_identity_key,
    encode,
    holder_id_of,
    open_cell,
    receipt_signed_bytes,
    seal,
    seal_bytes,
    sign_capability,
    sign_contract,
    sign_receipt,
    verify_capability,
    verify_cell_signature,
    verify_contract,
    verify_receipt,
)
from saihm.events.envelope import decrypt_bytes, encrypt_bytes
from tests.support.error_root import (
    call_allowing_saihm_errors as _call,
)
from tests.support.error_root import (
    hostile_values,
    with_hostile_arguments,
)

HOSTILE = hostile_values(b"\x00" * 32, b"\x00" * 16, b"\x00" * 3309, 1 << 64, -1, "KEY", object())

_KEY = HolderKey.from_seed(b"\x07" * 32)
_AUTH = AuthorityKey.from_seed(b"\x08" * 32)
_PAYLOAD = SealedPayload(
    content="hello", session_id=b"\x01" * 32, namespace="memory", kind="memory"
)
_CELL, _DEK = seal(_PAYLOAD, key=_KEY, kek_version=1, tier="hot", timestamp=5)
_RECEIPT = sign_receipt(_KEY, subject_id=_CELL.cell_id, operation=Operation.REMEMBER, timestamp=5)
_KEY_RECEIPT = sign_receipt(
    _KEY, subject_id=_KEY.holder_id, operation="KEY", timestamp=1, detail=_KEY.public_key
)
_CONTRACT = sign_contract(
    _KEY,
    grantee_ids=[b"\x02" * 32],
    shard_ids=[_CELL.cell_id],
    mode="PERMANENT",
    scope="read",
    expires_at=0,
    timestamp=5,
)
_SCOPE = CapabilityScope()
_CAP = sign_capability(
    _AUTH, holder_id=_KEY.holder_id, session_id=b"\x01" * 32, scope=_SCOPE, expires_at=99
)
_PROPOSAL = Proposal.create(
    holder_id=_KEY.holder_id,
    scope="param",
    param_key="k",
    proposed_value="v",
    snapshot_epoch=1,
    timestamp=2,
)
_MODELS = [_CELL, _RECEIPT, _KEY_RECEIPT, _CONTRACT, _CAP, _PROPOSAL, _PAYLOAD]


def _fields(model: Any) -> dict[str, Any]:
    return {name: getattr(model, name) for name in type(model).model_fields}


# (name, function, valid positional arguments, valid keyword arguments)
CASES: list[tuple[str, Callable[..., Any], list[Any], dict[str, Any]]] = [
    ("decode", decode, [_CELL.to_cbor()], {}),
    ("encode", encode, [{1: b"x", 2: [1, "a", None, True]}], {}),
    *[(f"{type(m).__name__}.from_cbor", type(m).from_cbor, [m.to_cbor()], {}) for m in _MODELS],
    *[(f"{type(m).__name__}()", type(m), [], _fields(m)) for m in _MODELS],
    ("CapabilityScope()", CapabilityScope, [], {"sessions": "one"}),
    ("CapabilityScope.from_map", CapabilityScope.from_map, [_SCOPE.to_map()], {}),
    ("Capability.from_token", Capability.from_token, [_CAP.to_token()], {}),
    ("ProposeDetail.from_map", ProposeDetail.from_map, [_PROPOSAL.detail().to_map()], {}),
    ("VoteDetail.from_map", VoteDetail.from_map, [{"approve": True, "weight": 1}], {}),
    (
        "GrantDetail.from_map",
        GrantDetail.from_map,
        [{"sessions": "all", "namespaces": None, "expiresAt": 3}],
        {},
    ),
    ("VoteDetail()", VoteDetail, [], {"approve": True, "weight": 1}),
    ("cell_message", cell_message, [b"\x01" * 32, b"\x02" * 32, 1, 2], {}),
    ("compute_cell_id", compute_cell_id, [1, b"\x00" * 16, b"\x00" * 32], {}),
    ("encrypt_bytes", encrypt_bytes, [b"text", b"\x00" * 32, b"\x00" * 16], {}),
    ("decrypt_bytes", decrypt_bytes, [_CELL.ciphertext, _DEK, _CELL.cell_nonce], {}),
    (
        "seal_bytes",
        lambda p, dek, nonce, v, tier, ts: seal_bytes(
            p, dek=dek, cell_nonce=nonce, key=_KEY, kek_version=v, tier=tier, timestamp=ts
        ),
        [b"text", b"\x00" * 32, b"\x00" * 16, 1, "hot", 3],
        {},
    ),
    (
        "seal",
        lambda v, tier, ts: seal(_PAYLOAD, key=_KEY, kek_version=v, tier=tier, timestamp=ts),
        [1, "hot", 3],
        {},
    ),
    ("decrypt", lambda dek: decrypt(_CELL, dek), [_DEK], {}),
    ("open_cell", lambda dek, pub: open_cell(_CELL, dek, pub), [_DEK, _KEY.public_key], {}),
    ("check_cell_id", check_cell_id, [_CELL], {}),
    ("verify_cell_signature", lambda pub: verify_cell_signature(_CELL, pub), [_KEY.public_key], {}),
    ("derive_identity_key", derive_identity_key, [b"\x00" * 32], {}),
    ("holder_id_of", holder_id_of, [_KEY.public_key], {}),
    ("HolderKey.from_seed", HolderKey.from_seed, [b"\x00" * 32], {}),
    ("AuthorityKey.from_seed", AuthorityKey.from_seed, [b"\x00" * 32], {}),
    (
        "sign_receipt",
        lambda sid, op, ts, detail, nonce: sign_receipt(
            _KEY, subject_id=sid, operation=op, timestamp=ts, detail=detail, receipt_nonce=nonce
        ),
        [b"\x01" * 32, "STATUS", 3, None, None],
        {},
    ),
    ("receipt_signed_bytes", receipt_signed_bytes, [_RECEIPT], {}),
    ("verify_receipt", lambda pub: verify_receipt(_RECEIPT, pub), [_KEY.public_key], {}),
    (
        "sign_contract",
        lambda g, s, mode, scope, exp, ts: sign_contract(
            _KEY, grantee_ids=g, shard_ids=s, mode=mode, scope=scope, expires_at=exp, timestamp=ts
        ),
        [[b"\x02" * 32], [b"\x03" * 32], "PERMANENT", "read", 0, 5],
        {},
    ),
    ("verify_contract", lambda pub: verify_contract(_CONTRACT, pub), [_KEY.public_key], {}),
    (
        "check_contract_terms",
        lambda g, s, mode, scope, exp, ts: check_contract_terms(
            grantee_ids=g, shard_ids=s, mode=mode, scope=scope, expires_at=exp, timestamp=ts
        ),
        [[b"\x02" * 32], [b"\x03" * 32], "TEMPORARY", "read", 10, 5],
        {},
    ),
    ("check_contract_rules", lambda now: check_contract_rules(_CONTRACT, now), [3], {}),
    (
        "sign_capability",
        lambda h, s, exp, tid: sign_capability(
            _AUTH, holder_id=h, session_id=s, scope=_SCOPE, expires_at=exp, token_id=tid
        ),
        [b"\x01" * 32, b"\x02" * 32, 9, None],
        {},
    ),
    (
        "verify_capability",
        lambda pub, now: verify_capability(_CAP, pub, now),
        [_AUTH.public_key, 3],
        {},
    ),
    (
        "Proposal.create",
        lambda h, scope, k, v, e, ts: Proposal.create(
            holder_id=h, scope=scope, param_key=k, proposed_value=v, snapshot_epoch=e, timestamp=ts
        ),
        [b"\x01" * 32, "param", "k", "v", 1, 2],
        {},
    ),
]
_IDS = [c[0] for c in CASES]


_OTHER_KEY = HolderKey.from_seed(b"\x09" * 32)
_OTHER_AUTH = AuthorityKey.from_seed(b"\x0a" * 32)
_RENONCED = _CELL.model_copy(update={"cell_nonce": b"\x00" * 16})  # its cellId no longer fits


def _refused(thunk: Callable[[], object]) -> bool:
    """Whether ``thunk`` raises a SaihmError: a check that accepts its valid arguments must
    also refuse the same call with one of them wrong, or it checks nothing."""
    try:
        thunk()
    except SaihmError:
        return True
    return False


# What each valid call returns (or, for a check that returns None, that it refuses the same
# call with one argument wrong): something each function could get wrong.
HOLDS: dict[str, Callable[[Any], bool]] = {
    "decode": lambda r: encode(r) == _CELL.to_cbor(),
    "encode": lambda r: decode(r) == {1: b"x", 2: [1, "a", None, True]},
    "CapabilityScope()": lambda r: r.sessions == "one" and r.namespaces is None,
    "CapabilityScope.from_map": lambda r: r == _SCOPE,
    "Capability.from_token": lambda r: r == _CAP,
    "ProposeDetail.from_map": lambda r: r == _PROPOSAL.detail(),
    "VoteDetail.from_map": lambda r: r.to_map() == {"approve": True, "weight": 1},
    "GrantDetail.from_map": (
        lambda r: r.to_map() == {"sessions": "all", "namespaces": None, "expiresAt": 3}
    ),
    "VoteDetail()": lambda r: r.to_map() == {"approve": True, "weight": 1},
    "cell_message": (
        lambda r: r == b"\x01" * 32 + b"\x02" * 32 + (1).to_bytes(4, "big") + (2).to_bytes(8, "big")
    ),
    "compute_cell_id": lambda r: (
        len(r) == 32 and r != compute_cell_id(2, b"\x00" * 16, b"\x00" * 32)
    ),
    "encrypt_bytes": lambda r: decrypt_bytes(r, b"\x00" * 32, b"\x00" * 16) == b"text",
    "decrypt_bytes": lambda r: SealedPayload.from_cbor(r) == _PAYLOAD,
    "seal_bytes": lambda r: check_cell_id(r) is None and r.holder_id == _KEY.holder_id,
    "seal": lambda r: open_cell(r[0], r[1], _KEY.public_key) == _PAYLOAD,
    "decrypt": lambda r: r == _PAYLOAD,
    "open_cell": lambda r: r == _PAYLOAD,
    "check_cell_id": lambda r: r is None and _refused(lambda: check_cell_id(_RENONCED)),
    "verify_cell_signature": (
        lambda r: (
            r is None and _refused(lambda: verify_cell_signature(_CELL, _OTHER_KEY.public_key))
        )
    ),
    "derive_identity_key": lambda r: len(r) >= 32 and r != derive_identity_key(b"\x01" * 32),
    "holder_id_of": lambda r: r == _KEY.holder_id,
    "HolderKey.from_seed": lambda r: holder_id_of(r.public_key) == r.holder_id,
    "AuthorityKey.from_seed": lambda r: r.public_key != _AUTH.public_key,
    "sign_receipt": (
        lambda r: r.operation == Operation.STATUS and verify_receipt(r, _KEY.public_key) is None
    ),
    "receipt_signed_bytes": lambda r: hashlib.sha256(r).digest() == _RECEIPT.receipt_id,
    "verify_receipt": (
        lambda r: r is None and _refused(lambda: verify_receipt(_RECEIPT, _OTHER_KEY.public_key))
    ),
    "sign_contract": lambda r: verify_contract(r, _KEY.public_key) is None,
    "verify_contract": (
        lambda r: r is None and _refused(lambda: verify_contract(_CONTRACT, _OTHER_KEY.public_key))
    ),
    "check_contract_terms": (
        lambda r: (
            r is None
            and _refused(
                lambda: check_contract_terms(
                    grantee_ids=[b"\x02" * 32],
                    shard_ids=[b"\x03" * 32],
                    mode="TEMPORARY",
                    scope="read",
                    expires_at=5,
                    timestamp=5,
                )
            )
        )
    ),
    "check_contract_rules": (
        lambda r: (
            r is None
            and _refused(
                lambda: check_contract_rules(_CONTRACT.model_copy(update={"mode": "TEMPORARY"}), 3)
            )
        )
    ),
    "sign_capability": lambda r: verify_capability(r, _AUTH.public_key, 8) is None,
    "verify_capability": (
        lambda r: (
            r is None
            and _refused(lambda: verify_capability(_CAP, _OTHER_AUTH.public_key, 3))
            and _refused(lambda: verify_capability(_CAP, _AUTH.public_key, 99))
        )
    ),
    "Proposal.create": lambda r: r.param_key == "k" and r.proposed_value == "v",
}


def test_every_case_says_what_its_valid_call_returns() -> None:
    models = {f"{type(m).__name__}.from_cbor" for m in _MODELS}
    models |= {f"{type(m).__name__}()" for m in _MODELS}
    assert set(_IDS) == set(HOLDS) | models


@pytest.mark.parametrize(("name", "fn", "args", "kwargs"), CASES, ids=_IDS)
def test_valid_arguments_pass(name, fn, args, kwargs) -> None:
    """The baseline of the hostile test below: each valid call succeeds and returns what it
    should (a decoder or constructor of a model, that model)."""
    result = fn(*args, **kwargs)
    if name in HOLDS:
        assert HOLDS[name](result), name
    else:
        assert result in _MODELS, name


@pytest.mark.parametrize(("name", "fn", "args", "kwargs"), CASES, ids=_IDS)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_hostile_arguments_raise_only_saihm_errors(name, fn, args, kwargs, data) -> None:
    _call(fn, *with_hostile_arguments(data, HOSTILE, args, kwargs))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_hostile_bytes_to_every_decoder(raw: bytes) -> None:
    for model in (Cell, Receipt, Contract, Capability, Proposal, SealedPayload):
        _call(model.from_cbor, [raw], {})
    _call(decode, [raw], {})
    _call(Capability.from_token, [raw.decode("latin-1")], {})


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2000), st.integers(0, 255))
def test_one_corrupted_byte_of_a_valid_encoding_is_a_saihm_error_or_another_valid_value(
    pos: int, byte: int
) -> None:
    for m in _MODELS:
        raw = bytearray(m.to_cbor())
        raw[pos % len(raw)] = byte
        _call(type(m).from_cbor, [bytes(raw)], {})


def test_constructing_a_model_with_a_bad_field_names_the_field_not_the_value() -> None:
    secret = os.urandom(8).hex()
    with pytest.raises(MalformedInput) as caught:
        SealedPayload(content=secret, session_id=b"short", namespace="memory", kind="memory")
    assert "session_id" in str(caught.value) and secret not in str(caught.value)
    assert not isinstance(caught.value, ValueError)


def test_a_non_key_receipt_has_no_public_key_and_says_so_as_malformed_input() -> None:
    assert _KEY_RECEIPT.public_key == _KEY.public_key
    with pytest.raises(MalformedInput, match="REMEMBER receipt carries no public key"):
        _RECEIPT.public_key  # noqa: B018
