"""Model encodings: byte-identical round trips and strict decoding (protocol "Wire formats")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saihm.errors import MalformedInput
from saihm.events import (
    Capability,
    CapabilityScope,
    Cell,
    Contract,
    DecodeError,
    GrantDetail,
    Operation,
    Proposal,
    ProposeDetail,
    Receipt,
    SealedPayload,
    VoteDetail,
    decode,
    encode,
)

id32 = st.binary(min_size=32, max_size=32)
nonce16 = st.binary(min_size=16, max_size=16)
# Large byte strings are drawn from a few fixed values (hypothesis dislikes huge examples).
sig = st.binary(min_size=2, max_size=2).map(lambda b: b * 1654 + b[:1])
u64 = st.integers(0, 2**64 - 1)
u32 = st.integers(0, 2**32 - 1)
text = st.text(max_size=12)
ne_text = st.text(min_size=1, max_size=12)
name = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12
)

cells = st.builds(
    Cell,
    cell_id=id32,
    holder_id=id32,
    kek_version=u32,
    tier=name,
    cell_nonce=nonce16,
    ciphertext=st.binary(min_size=16, max_size=64),
    signature=sig,
    timestamp=u64,
)
details = {
    Operation.KEY: st.binary(min_size=2, max_size=2).map(lambda b: b * 976),
    Operation.PROPOSE: st.builds(
        ProposeDetail,
        scope=ne_text,
        param_key=st.none() | text,
        proposed_value=st.none() | text,
        snapshot_epoch=u64,
    ),
    Operation.VOTE: st.builds(VoteDetail, approve=st.booleans(), weight=u64),
    Operation.GRANT: st.builds(
        GrantDetail, namespaces=st.none() | st.lists(ne_text, max_size=3).map(tuple), expires_at=u64
    ),
}


@st.composite
def receipts(draw):
    op = draw(st.sampled_from(list(Operation)))
    detail = draw(details[op]) if op in details else None
    return Receipt(
        receipt_id=draw(id32),
        subject_id=draw(id32),
        operation=op,
        holder_id=draw(id32),
        signature=draw(sig),
        timestamp=draw(u64),
        receipt_nonce=draw(nonce16),
        detail=detail,
    )


contracts = st.builds(
    Contract,
    contract_id=id32,
    holder_id=id32,
    grantee_ids=st.lists(id32, min_size=1, max_size=3).map(tuple),
    shard_ids=st.lists(id32, min_size=1, max_size=3).map(tuple),
    mode=st.sampled_from(["TEMPORARY", "PERMANENT", "SYNDICATE"]),
    scope=st.sampled_from(["read", "write"]),
    expires_at=u64,
    timestamp=u64,
    signature=sig,
    contract_nonce=nonce16,
)
payloads = st.builds(
    SealedPayload,
    content=st.text(max_size=40),
    session_id=id32,
    namespace=ne_text,
    kind=st.sampled_from(["memory", "said", "did", "end"]),
    seq=st.none() | u64,
    prev=st.none() | id32,
)
scopes = st.one_of(
    st.builds(CapabilityScope, sessions=st.just("one")),
    st.builds(
        CapabilityScope,
        sessions=st.just("all"),
        namespaces=st.none() | st.lists(ne_text, max_size=3).map(tuple),
        grant_id=id32,
    ),
    st.builds(
        CapabilityScope,
        sessions=st.just("all"),
        namespaces=st.lists(ne_text, min_size=1, max_size=3).map(tuple),
        grant_id=id32,
        consumer=name,
        mode=st.sampled_from(["read", "write", "readwrite"]),
    ),
)
capabilities = st.builds(
    Capability,
    holder_id=id32,
    session_id=id32,
    scope=scopes,
    expires_at=u64,
    token_id=nonce16,
    signature=sig,
)
proposals = st.builds(
    Proposal,
    proposal_id=id32,
    holder_id=id32,
    scope=ne_text,
    param_key=st.none() | text,
    proposed_value=st.none() | text,
    snapshot_epoch=u64,
    timestamp=u64,
    proposal_nonce=nonce16,
)

ALL = [
    (Cell, cells),
    (Receipt, receipts()),
    (Contract, contracts),
    (SealedPayload, payloads),
    (Capability, capabilities),
    (Proposal, proposals),
]


@pytest.mark.parametrize(("model", "strategy"), ALL, ids=[m.__name__ for m, _ in ALL])
def test_cbor_round_trip_is_byte_identical(model, strategy):
    @given(strategy)
    def check(obj):
        data = obj.to_cbor()
        again = model.from_cbor(data)
        assert again == obj
        assert again.to_cbor() == data

    check()


@given(capabilities)
def test_token_round_trip(cap):
    token = cap.to_token()
    assert "=" not in token
    assert Capability.from_token(token) == cap


# Strict decoding -------------------------------------------------------------------------------

CELL = {
    1: b"\x01" * 32,
    2: b"\x02" * 32,
    3: 1,
    4: "STANDARD",
    5: b"\x05" * 16,
    6: b"\x06" * 57,
    7: b"\x07" * 3309,
    8: 1747526400,
}


def _with(**changes):
    m = dict(CELL)
    for k, v in changes.items():
        key = int(k[1:])
        if v is ...:
            del m[key]
        else:
            m[key] = v
    return encode(m)


def test_wire_example_cell_decodes():
    cell = Cell.from_cbor(encode(CELL))
    assert cell.tier == "STANDARD" and cell.timestamp == 1747526400
    assert cell.to_cbor() == encode(CELL)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("31-byte cellId", _with(k1=b"\x01" * 31)),
        ("33-byte holderId", _with(k2=b"\x02" * 33)),
        ("15-byte cellNonce", _with(k5=b"\x05" * 15)),
        ("17-byte cellNonce", _with(k5=b"\x05" * 17)),
        ("short signature", _with(k7=b"\x07" * 3308)),
        ("negative timestamp", _with(k8=-1)),
        ("timestamp as text", _with(k8="1747526400")),
        ("kekVersion over 32 bits", _with(k3=2**32)),
        ("kekVersion as bool", _with(k3=True)),
        ("missing key 8", _with(k8=...)),
        ("unknown key 9", _with(k9=0)),
        ("id as text", _with(k1="01" * 32)),
        ("ciphertext shorter than a tag", _with(k6=b"\x06" * 15)),
        ("empty tier", _with(k4="")),
        ("tier with a space", _with(k4="ST ANDARD")),
    ],
)
def test_cell_rejects(name, data):
    with pytest.raises(DecodeError):
        Cell.from_cbor(data)


def test_cell_rejects_timestamp_of_2_pow_64():
    # 2^64 is not a CBOR uint; encoded as a bignum tag it is rejected by the codec.
    data = encode(CELL)[:-5] + bytes.fromhex("c249010000000000000000")
    with pytest.raises(DecodeError):
        Cell.from_cbor(data)


def test_cell_rejects_float_timestamp_and_text_keys():
    import cbor2

    m = dict(CELL)
    m[8] = 1747526400.0
    with pytest.raises(DecodeError):
        Cell.from_cbor(cbor2.dumps(m, canonical=True))
    with pytest.raises(DecodeError):
        Cell.from_cbor(encode({str(k): v for k, v in CELL.items()}))
    with pytest.raises(DecodeError):
        Cell.from_cbor(encode([CELL]))


def _receipt_map(op, detail=None):
    m = {1: b"\x01" * 32, 2: b"\x02" * 32, 3: op, 4: b"\x04" * 32, 5: b"\x05" * 3309}
    m |= {6: 1747526400, 8: b"\x08" * 16}
    if detail is not None:
        m[7] = detail
    return m


def test_receipt_detail_rules():
    assert Receipt.from_cbor(encode(_receipt_map("REMEMBER"))).detail is None
    key = Receipt.from_cbor(encode(_receipt_map("KEY", b"\x09" * 1952)))
    assert key.detail == b"\x09" * 1952
    vote = Receipt.from_cbor(encode(_receipt_map("VOTE", {"approve": True, "weight": 3})))
    assert vote.detail == VoteDetail(approve=True, weight=3)


@pytest.mark.parametrize(
    ("name", "m"),
    [
        ("unknown operation", _receipt_map("DELETE")),
        ("lowercase operation", _receipt_map("remember")),
        ("REMEMBER with detail", _receipt_map("REMEMBER", b"x")),
        ("FORGET with detail", _receipt_map("FORGET", {"approve": True, "weight": 1})),
        ("KEY without detail", _receipt_map("KEY")),
        ("KEY with a short key", _receipt_map("KEY", b"\x09" * 1951)),
        ("VOTE detail missing weight", _receipt_map("VOTE", {"approve": True})),
        ("VOTE detail with int approve", _receipt_map("VOTE", {"approve": 1, "weight": 1})),
        ("VOTE detail negative weight", _receipt_map("VOTE", {"approve": True, "weight": -1})),
        ("VOTE detail extra key", _receipt_map("VOTE", {"approve": True, "weight": 1, "x": 0})),
        ("PROPOSE detail as bytes", _receipt_map("PROPOSE", b"\x00")),
        (
            "GRANT with sessions one",
            _receipt_map("GRANT", {"sessions": "one", "namespaces": None, "expiresAt": 1}),
        ),
        ("15-byte receiptNonce", {**_receipt_map("STATUS"), 8: b"\x08" * 15}),
        ("missing receiptNonce", {k: v for k, v in _receipt_map("STATUS").items() if k != 8}),
    ],
)
def test_receipt_rejects(name, m):
    with pytest.raises(DecodeError):
        Receipt.from_cbor(encode(m))


def test_receipt_model_refuses_detail_on_wrong_operation():
    # One error root: the model's own rule surfaces as MalformedInput, not pydantic's error.
    with pytest.raises(MalformedInput, match="REMEMBER receipts carry no detail"):
        Receipt(
            receipt_id=b"\x01" * 32,
            subject_id=b"\x02" * 32,
            operation=Operation.REMEMBER,
            holder_id=b"\x03" * 32,
            signature=b"\x04" * 3309,
            timestamp=1,
            receipt_nonce=b"\x05" * 16,
            detail=VoteDetail(approve=True, weight=1),
        )


def _contract_map(**changes):
    m = {
        1: b"\x01" * 32,
        2: b"\x02" * 32,
        3: [b"\x03" * 32],
        4: [b"\x04" * 32],
        5: "TEMPORARY",
        6: "read",
        7: 1747612800,
        8: 1747526400,
        9: b"\x09" * 3309,
        10: b"\x0a" * 16,
    }
    m.update({int(k[1:]): v for k, v in changes.items()})
    return encode(m)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("31-byte grantee", _contract_map(k3=[b"\x03" * 31])),
        ("empty grantee list", _contract_map(k3=[])),
        ("empty shard list", _contract_map(k4=[])),
        ("grantees not a list", _contract_map(k3=b"\x03" * 32)),
        ("15-byte contractNonce", _contract_map(k10=b"\x0a" * 15)),
        ("negative expiresAt", _contract_map(k7=-5)),
    ],
)
def test_contract_rejects(name, data):
    with pytest.raises(DecodeError):
        Contract.from_cbor(data)


def test_sealed_payload_encodes_none_as_null_under_every_key():
    p = SealedPayload(content="x", session_id=b"\x01" * 32, namespace="memory", kind="memory")
    assert decode(p.to_cbor()) == {
        1: "x",
        2: b"\x01" * 32,
        3: "memory",
        4: "memory",
        5: None,
        6: None,
    }
    with pytest.raises(DecodeError):
        SealedPayload.from_cbor(encode({1: "x", 2: b"\x01" * 32, 3: "memory", 4: "memory"}))
    with pytest.raises(DecodeError):
        SealedPayload.from_cbor(
            encode({1: "x", 2: b"\x01" * 32, 3: "memory", 4: "note", 5: None, 6: None})
        )


def test_sealed_payload_repr_hides_content():
    p = SealedPayload(content="secret words", session_id=b"\x01" * 32, namespace="m", kind="said")
    assert "secret words" not in repr(p)
