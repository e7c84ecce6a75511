"""The client's sans-I/O core: every binding call as a request description and its decoder.

A :class:`Call` is what one method of the client sends (the binding method and its params,
checked before anything is sent) and how the 2xx body that comes back becomes a typed result
or a :class:`~saihm.client.errors.ClientError`. It does no I/O: ``AsyncClient`` and
``Client`` send the request over their transport (saihm/client/_transport.py) and hand the
parsed body to :meth:`Call.result`, so both faces of the client build the same requests and
accept the same answers (saihm-protocol "HTTPS binding" and "Tool surface"; DESIGN.md "HTTP"
for the extension methods and params).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from saihm.client import _checks, models
from saihm.client.errors import ClientError
from saihm.client.models import RecalledCell

__all__ = [
    "Call",
    "RecordKind",
    "accept_contract",
    "decline_contract",
    "forget",
    "forget_session",
    "governance_propose",
    "governance_vote",
    "parse",
    "recall",
    "record",
    "remember",
    "revoke_share",
    "share",
    "status",
]

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")
RecordKind = Literal["said", "did", "end"]
_RECORD_KINDS = ("said", "did", "end")


def parse(model: type[M], body: Any, method: str) -> M:
    """``body`` as ``model``, or a ``malformed`` :class:`ClientError` (the outcome is unknown)."""
    if not isinstance(body, dict):
        raise ClientError(
            f"malformed response to {method}: the result is not a JSON object; "
            "the operator may or may not have acted",
            kind="malformed",
        )
    try:
        return model.model_validate(body)
    except ValidationError as err:
        # Name the model's own fields that failed, never a value or an operator-chosen key.
        known = {f.alias or name for name, f in model.model_fields.items()}
        failed = {str(e["loc"][0]) for e in err.errors() if e["loc"]}
        shown = ", ".join(sorted(failed & known)[:5])
        raise ClientError(
            f"malformed response to {method} (fields: {shown or 'unnamed'}); "
            "the operator may or may not have acted",
            kind="malformed",
        ) from err


@dataclass(frozen=True)
class Call(Generic[R]):
    """One binding call: ``{"method": method, "params": params}`` to send, and ``decode`` for
    the parsed 2xx body. ``params`` passed the client's own checks when the call was made."""

    method: str
    params: dict[str, Any]
    decode: Callable[[Any, str], R]

    def result(self, body: Any) -> R:
        """The typed result of the parsed 2xx ``body``, or a ``malformed`` :class:`ClientError`."""
        return self.decode(body, self.method)


def _as(model: type[M]) -> Callable[[Any, str], M]:
    def decode(body: Any, method: str) -> M:
        return parse(model, body, method)

    return decode


# -- the eight tools ------------------------------------------------------------------------


def remember(
    content: str,
    namespace: str | None,
    supersedes: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Call[models.Remembered]:
    """saihm_remember; blank content, a ``supersedes`` that is not a cellId and ``metadata``
    JSON cannot hold are refused before sending."""
    params: dict[str, Any] = {"content": _checks.check_content(content)}
    if namespace is not None:
        params["namespace"] = namespace
    if supersedes is not None:
        params["supersedes"] = _checks.check_cell_id(supersedes, "supersedes")
    if metadata is not None:
        params["metadata"] = _checks.check_metadata(metadata)
    return Call("saihm_remember", params, _as(models.Remembered))


def recall(
    query: str | None,
    namespaces: list[str] | None,
    kinds: list[str] | None,
    limit: int | None,
    holder_id: str | None,
) -> Call[list[RecalledCell]]:
    """saihm_recall; each cell whose holderIdHex is not ``holder_id`` (the caller's, learned
    from saihm_status) is marked ``shared_by_other_holder`` (conformance item 9)."""
    params: dict[str, Any] = {} if query is None else {"query": query}
    if namespaces is not None:
        params["namespaces"] = list(namespaces)
    if kinds is not None:
        params["kinds"] = list(kinds)
    if limit is not None:
        params["limit"] = limit

    def decode(body: Any, method: str) -> list[RecalledCell]:
        if not isinstance(body, list):
            raise ClientError(
                f"malformed response to {method}: the result is not an array", kind="malformed"
            )
        cells = []
        for element in body:
            if isinstance(element, dict):
                holder = element.get("holderIdHex")
                mine = (
                    holder_id is not None
                    and isinstance(holder, str)
                    and holder.lower() == holder_id.lower()
                )
                element = {**element, "sharedByOtherHolder": not mine}
            cells.append(parse(RecalledCell, element, method))
        return cells

    return Call("saihm_recall", params, decode)


def forget(cell_id: str) -> Call[models.Forgotten]:
    """saihm_forget; a result with ``success`` true must name the requested cell."""

    def decode(body: Any, method: str) -> models.Forgotten:
        result = parse(models.Forgotten, body, method)
        if result.success and result.cell_id != cell_id:
            raise ClientError(
                f"malformed response to {method}: success without the requested cellId; "
                "the cell may still be stored",
                kind="malformed",
            )
        return result

    return Call("saihm_forget", {"id": cell_id}, decode)


def status() -> Call[models.Status]:
    """saihm_status."""
    return Call("saihm_status", {}, _as(models.Status))


def share(
    grantees: list[str],
    shard_ids: list[str],
    mode: Literal["temporary", "permanent", "syndicate"],
    scope: Literal["read", "write", "readwrite"],
    expiry_epoch: str | int | None,
) -> Call[models.Shared]:
    """saihm_share; grantee, shard and expiry checks run before sending."""
    expiry = str(expiry_epoch) if isinstance(expiry_epoch, int) else expiry_epoch
    params = {
        "granteeIdHashesHex": _checks.check_grantees(list(grantees)),
        "shardIds": _checks.check_shard_ids(list(shard_ids)),
        "type": mode.lower(),
        "scope": scope,
        "expiryEpoch": _checks.check_expiry_epoch(expiry),
    }
    return Call("saihm_share", params, _as(models.Shared))


def _confirmed_revocation(body: Any, method: str) -> models.Revoked:
    result = parse(models.Revoked, body, method)
    if not result.revoked:
        raise ClientError(
            "revocation not confirmed (revoked is not true): treat access as still in force",
            kind="malformed",
        )
    return result


def revoke_share(contract_id: str) -> Call[models.Revoked]:
    """saihm_revoke_share; an answer whose ``revoked`` is not true is malformed."""
    return Call("saihm_revoke_share", {"contractId": contract_id}, _confirmed_revocation)


def governance_propose(
    scope: Literal["emission_param", "protocol_upgrade"],
    param_key: str | None,
    proposed_value: str | None,
) -> Call[models.Proposed]:
    """saihm_governance_propose; the proposal's shape is checked before sending."""
    _checks.check_proposal(scope, param_key, proposed_value)
    params = {"scope": scope, "paramKey": param_key, "proposedValue": proposed_value}
    return Call("saihm_governance_propose", params, _as(models.Proposed))


def _confirmed_vote(body: Any, method: str) -> models.Voted:
    result = parse(models.Voted, body, method)
    if result.weight is None and result.cast_at_epoch is None:
        raise ClientError(
            "vote unconfirmed: the response carries neither weight nor castAtEpoch",
            kind="malformed",
        )
    return result


def governance_vote(proposal_id: str, approve: bool) -> Call[models.Voted]:
    """saihm_governance_vote; an answer with neither weight nor castAtEpoch is malformed."""
    params = {"proposalId": proposal_id, "approve": bool(approve)}
    return Call("saihm_governance_vote", params, _confirmed_vote)


# -- extension methods (DESIGN.md "HTTP") -----------------------------------------------------


def accept_contract(contract_id: str) -> Call[models.ContractAnswer]:
    """saihm_accept_contract."""
    return Call("saihm_accept_contract", {"contractId": contract_id}, _as(models.ContractAnswer))


def decline_contract(contract_id: str) -> Call[models.ContractAnswer]:
    """saihm_decline_contract."""
    return Call("saihm_decline_contract", {"contractId": contract_id}, _as(models.ContractAnswer))


def record(
    kind: RecordKind, content: str, metadata: Mapping[str, Any] | None = None
) -> Call[models.Recorded]:
    """saihm_record; the kind, the content of a "said" or "did" entry and ``metadata`` are
    checked before sending."""
    if kind not in _RECORD_KINDS:
        raise ClientError("refused before sending: kind must be said, did or end", kind="refused")
    if kind != "end":
        _checks.check_content(content)
    params: dict[str, Any] = {"kind": kind, "content": content}
    if metadata is not None:
        params["metadata"] = _checks.check_metadata(metadata)
    return Call("saihm_record", params, _as(models.Recorded))


def forget_session(session_id: str) -> Call[models.SessionForgotten]:
    """saihm_forget_session."""
    return Call("saihm_forget_session", {"sessionId": session_id}, _as(models.SessionForgotten))
