"""The dataset's leaf reader and columns (saihm/audit/dataset.py)."""

from __future__ import annotations

import os

import cbor2
from hypothesis import given
from hypothesis import strategies as st

from saihm.audit.dataset import EVENT_COLUMNS, Columns, read_leaf
from saihm.events import HolderKey, Operation, VoteDetail, sign_receipt

KEY = HolderKey.from_seed(bytes(32))


def _vote() -> bytes:
    receipt = sign_receipt(
        KEY,
        subject_id=os.urandom(32),
        operation=Operation.VOTE,
        timestamp=1_800_000_000,
        detail=VoteDetail(approve=True, weight=2**60),
    )
    return receipt.to_cbor()


def test_a_receipt_reads_into_every_column() -> None:
    leaf = read_leaf(_vote())
    assert leaf is not None and leaf.operation == "VOTE" and leaf.holder_id == KEY.holder_id
    columns = Columns()
    columns.add(7, leaf)
    (row,) = columns.as_rows()
    assert list(row) == [name for name, _ in EVENT_COLUMNS]
    assert row["index"] == 7 and row["timestamp"] == 1_800_000_000
    assert row["approve"] is True and row["weight"] == 2**60 and row["scope"] is None


@given(st.binary(max_size=300))
def test_arbitrary_bytes_are_a_receipt_or_none_never_an_error(data: bytes) -> None:
    assert read_leaf(data) is None or len(read_leaf(data).receipt_id) == 32  # type: ignore[union-attr]


@given(
    st.dictionaries(
        st.integers(0, 9),
        st.one_of(st.binary(max_size=40), st.integers(-5, 2**64), st.text(max_size=10)),
    )
)
def test_maps_missing_or_mistyping_a_field_are_not_receipts(m: dict) -> None:
    leaf = read_leaf(cbor2.dumps(m))
    if leaf is not None:
        assert all(isinstance(m[k], bytes) and len(m[k]) == 32 for k in (1, 2, 4))
        assert type(m[6]) is int and 0 <= m[6] < 2**63
