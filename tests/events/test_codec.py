"""Deterministic CBOR (RFC 8949 §4.2.1): canonical output and strict rejection."""

from __future__ import annotations

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.events import DecodeError, EncodeError, decode, encode

scalars = (
    st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.binary(max_size=40)
    | st.text(max_size=20)
    | st.booleans()
    | st.none()
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.integers(-30, 300) | st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(values)
def test_round_trip_is_byte_identical(value):
    data = encode(value)
    assert decode(data) == value
    assert encode(decode(data)) == data


@given(values)
def test_agrees_with_cbor2_on_values_without_mixed_key_types(value):
    # cbor2's canonical mode sorts keys length-first (RFC 7049); for single-type keys of one
    # major type it agrees with RFC 8949 bytewise order, so it is an independent check there.
    def homogeneous(v):
        if isinstance(v, dict):
            kinds = {type(k) for k in v}
            ints = [k for k in v if isinstance(k, int)]
            signs = {k >= 0 for k in ints}
            return len(kinds) <= 1 and len(signs) <= 1 and all(map(homogeneous, v.values()))
        if isinstance(v, list):
            return all(map(homogeneous, v))
        return True

    if homogeneous(value):
        assert encode(value) == cbor2.dumps(value, canonical=True)


def test_keys_sorted_bytewise_not_length_first():
    # 24 encodes as 0x18 0x18 and -1 as 0x20: bytewise order puts 24 first (§4.2.1).
    assert encode({-1: 0, 24: 0}) == bytes.fromhex("a2181800" + "2000")


@pytest.mark.parametrize(
    ("name", "hex_input"),
    [
        ("non-shortest uint (1 as 0x1801)", "1801"),
        ("non-shortest uint (1 as 0x190001)", "190001"),
        ("non-shortest length", "5801ff"),
        ("unsorted map keys", "a2020101 01"),
        ("duplicate map keys", "a2010101 02"),
        ("trailing bytes", "0100"),
        ("indefinite byte string", "5f4101ff"),
        ("indefinite array", "9f01ff"),
        ("indefinite map", "bf0101ff"),
        ("tag 1 (epoch time)", "c11a514b67b0"),
        ("tag 2 bignum", "c249010000000000000000"),
        ("tag 24 (embedded CBOR)", "d81841 00"),
        ("half float", "f93c00"),
        ("single float", "fa3f800000"),
        ("double float", "fb3ff0000000000000"),
        ("undefined", "f7"),
        ("simple value 0", "e0"),
        ("invalid UTF-8 text", "61ff"),
        ("truncated", "5820" + "00" * 31),
        ("empty input", ""),
    ],
)
def test_decode_rejects(name, hex_input):
    with pytest.raises(DecodeError):
        decode(bytes.fromhex(hex_input.replace(" ", "")))


@pytest.mark.parametrize("value", [1.0, (1, 2), 2**64, -(2**64) - 1, {1, 2}, object()])
def test_encode_rejects_values_outside_the_data_model(value):
    with pytest.raises(EncodeError):
        encode(value)


def test_decode_error_is_a_malformed_input():
    from saihm.errors import MalformedInput

    assert issubclass(DecodeError, MalformedInput)


@settings(max_examples=200)
@given(values, st.data())
def test_every_single_byte_mutation_is_rejected_or_still_canonical(value, data):
    encoded = encode(value)
    pos = data.draw(st.integers(0, len(encoded) - 1))
    flip = data.draw(st.integers(1, 255))
    mutated = encoded[:pos] + bytes([encoded[pos] ^ flip]) + encoded[pos + 1 :]
    try:
        out = decode(mutated)
    except DecodeError:
        return
    assert encode(out) == mutated  # whatever is accepted is exactly canonical
