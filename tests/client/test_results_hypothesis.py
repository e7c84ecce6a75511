"""Whatever JSON an operator (or anything answering in its place) sends, a client method
returns a checked typed result or raises ``ClientError`` — never another exception, never a
result missing what the protocol requires."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.client import ClientError, models
from saihm.client._core import parse as _parse
from saihm.client._wire import is_result_identifier

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = [
    "cellId",
    "success",
    "contractId",
    "accepted",
    "revoked",
    "agentIdHashHex",
    "plaintext",
    "kind",
    "seq",
    "epoch",
    "incomingContracts",
    "governance",
]
near_results = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6)

MODELS = [
    models.Remembered,
    models.Recorded,
    models.RecalledCell,
    models.Forgotten,
    models.Status,
    models.Shared,
    models.Revoked,
    models.ContractAnswer,
    models.Proposed,
    models.Voted,
    models.SessionForgotten,
]


@pytest.mark.parametrize("model", MODELS)
@settings(max_examples=40, deadline=None)
@given(body=json_values | near_results)
def test_any_answer_is_a_checked_result_or_a_client_error(model, body) -> None:
    try:
        result = _parse(model, body, "saihm_x")
    except ClientError as err:
        assert err.kind == "malformed" and err.outcome == "unknown"
        return
    for name in ("cell_id", "contract_id", "agent_id_hash_hex", "proposal_id", "session_id"):
        value = getattr(result, name, None)
        if name in type(result).model_fields and type(result).model_fields[name].is_required():
            assert is_result_identifier(value)


def test_a_malformed_answer_names_only_the_models_fields() -> None:
    body = {"agentIdHashHex": "x y", "shards": {"IGNORE_ALL_PREVIOUS": "many"}}
    with pytest.raises(ClientError) as caught:
        _parse(models.Status, body, "saihm_status")
    assert "agentIdHashHex" in str(caught.value) and "shards" in str(caught.value)
    assert "IGNORE" not in str(caught.value) and "x y" not in str(caught.value)
