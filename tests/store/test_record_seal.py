"""The record MAC (saihm/projections/seal.py): deterministic, bound to database, key and value."""

from __future__ import annotations

import hmac
import logging

from hypothesis import given
from hypothesis import strategies as st

from saihm.projections import RecordSeal, derive_record_key
from saihm.projections.seal import TAG_BYTES

KEY = derive_record_key(b"\x01" * 32)
names = st.sampled_from([b"p_cells", b"p_contracts", b"p_grants", b"p_holders"])
keys = st.binary(min_size=0, max_size=80)
values = st.binary(min_size=0, max_size=300)


@given(names, keys, values)
def test_a_sealed_record_opens_to_its_value_and_the_tag_is_hmac_sha256(name, key, value):
    seal = RecordSeal(KEY)
    stored = seal.seal(name, key, value)
    assert seal.open(name, key, stored) == value
    assert seal.seal(name, key, value) == stored  # deterministic: a rebuild writes these bytes
    message = len(name).to_bytes(1, "big") + name + len(key).to_bytes(2, "big") + key + value
    assert stored[-TAG_BYTES:] == hmac.digest(KEY, message, "sha256")


@given(names, names, keys, keys, values, st.data())
def test_any_change_to_name_key_or_stored_bytes_is_refused(n1, n2, k1, k2, value, data):
    seal = RecordSeal(KEY)
    stored = seal.seal(n1, k1, value)
    if (n1, k1) != (n2, k2):
        assert seal.open(n2, k2, stored) is None
    position = data.draw(st.integers(0, len(stored) - 1))
    bit = data.draw(st.integers(0, 7))
    flipped = bytearray(stored)
    flipped[position] ^= 1 << bit
    assert seal.open(n1, k1, bytes(flipped)) is None
    assert seal.open(n1, k1, stored[:-1]) is None
    assert seal.open(n1, k1, stored[1:]) is None
    assert RecordSeal(derive_record_key(b"\x02" * 32)).open(n1, k1, stored) is None


def test_a_refused_record_is_logged_by_database_and_key_never_by_value(caplog):
    seal = RecordSeal(KEY)
    with caplog.at_level(logging.WARNING, logger="saihm.store"):
        assert seal.open(b"p_grants", b"\xab" * 4, b"secret-value" + bytes(32)) is None
    (record,) = caplog.records
    assert "p_grants" in record.getMessage() and "abababab" in record.getMessage()
    assert "secret" not in record.getMessage()
    assert "hidden" in repr(seal)
