"""saihm_remember's extension params ``supersedes`` and ``metadata`` and the recall element's
extension fields of the same names (issue 33 items 5 and 6; docs/retrieval.md "Extension
params"): the link and the structure are sealed in the new cell, rendered after the
protocol's members, and bad input writes nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.errors import SaihmError
from saihm.events import SealedPayload
from saihm.events.models import METADATA_MAX_BYTES, dump_metadata
from saihm.protocol import call
from tests.protocol.test_wire_shapes import world as world

SESSION = b"s" * 32
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def test_a_superseding_cell_names_the_cell_it_replaced_after_the_protocols_members(world):
    operator, token = world
    a = token(operator.admin.create_holder())
    old = call(operator, a, "saihm_remember", {"content": "lives in Leeds"})
    new = call(
        operator,
        a,
        "saihm_remember",
        {
            "content": "moved to York",
            "supersedes": old["cellId"],
            "metadata": {"colour": ["vermilion", 1]},
        },
    )
    said = call(operator, a, "saihm_record", {"kind": "said", "content": "hi", "metadata": {}})
    items = {i["cellId"]: i for i in call(operator, a, "saihm_recall", {})}
    assert set(items) == {new["cellId"], said["cellId"]}
    cell = items[new["cellId"]]
    assert list(cell)[-2:] == ["supersedes", "metadata"] and list(cell)[-3] == "sessionId"
    assert cell["supersedes"] == old["cellId"] and cell["metadata"] == {"colour": ["vermilion", 1]}
    assert items[said["cellId"]]["metadata"] == {} and "supersedes" not in items[said["cellId"]]
    # The structure is not text: the operator's ranking never sees it.
    assert call(operator, a, "saihm_recall", {"query": "vermilion colour"}) == []


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"metadata": [1]}, "bad_request"),
        ({"metadata": "{}"}, "bad_request"),
        ({"metadata": {"s": "\ud800"}}, "bad_request"),
        ({"metadata": {"s": "x" * METADATA_MAX_BYTES}}, "too_large"),
        ({"supersedes": "zz" * 32}, "bad_request"),
        ({"supersedes": "ab" * 32}, "not_found"),
    ],
)
def test_bad_supersedes_or_metadata_writes_nothing(world, params, code):
    operator, token = world
    a = token(operator.admin.create_holder())
    before = operator.store.size()
    with pytest.raises(SaihmError) as caught:
        call(operator, a, "saihm_remember", {"content": "x", **params})
    assert caught.value.code == code
    assert operator.store.size() == before  # no receipt was logged
    assert call(operator, a, "saihm_recall", {}) == []


@settings(max_examples=60)
@given(value=st.dictionaries(st.text(max_size=6), JSON, max_size=4), link=st.booleans())
def test_sealed_payload_round_trips_supersedes_and_metadata(value, link):
    payload = SealedPayload(
        content="text",
        session_id=SESSION,
        namespace="memory",
        kind="memory",
        supersedes=b"\x01" * 32 if link else None,
        metadata=dump_metadata(value),
    )
    assert SealedPayload.from_cbor(payload.to_cbor()) == payload


def test_a_payload_without_them_keeps_its_six_keys_and_bytes():
    # Cells written before these fields decode and re-encode to the very same bytes.
    plain = SealedPayload(content="t", session_id=SESSION, namespace="memory", kind="memory")
    assert plain.to_cbor()[0] == 0xA6  # a CBOR map of six pairs
    assert SealedPayload.from_cbor(plain.to_cbor()).to_cbor() == plain.to_cbor()


@pytest.mark.parametrize("text", ["[1]", '{"a":1,"a":2}', '{"a": 1}', "{", '{"a":NaN}', ""])
def test_sealed_metadata_must_be_the_one_compact_form_of_an_object(text):
    with pytest.raises(SaihmError):
        SealedPayload(
            content="t", session_id=SESSION, namespace="memory", kind="memory", metadata=text
        )


def test_the_cell_cache_counts_a_cells_metadata_against_its_bound():
    from saihm.retrieval import analyse
    from saihm.store.read.cache import _estimate
    from saihm.store.read.views import CellHeader, OpenedCell

    header = CellHeader(b"c" * 32, b"h" * 32, 1, "STANDARD", b"n" * 16, b"s" * 16, 0)

    def opened(metadata: str | None) -> OpenedCell:
        payload = SealedPayload(
            content="tea",
            session_id=SESSION,
            namespace="memory",
            kind="memory",
            metadata=metadata,
        )
        return OpenedCell(cell=header, payload=payload, shared=False, index=0)

    big = dump_metadata({"value": "x" * 100_000})
    plain = _estimate(opened(None), analyse("tea"), None)
    assert _estimate(opened(big), analyse("tea"), None) >= plain + 2 * len(big)
