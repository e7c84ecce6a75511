"""The client's sans-I/O core: every binding call as a request description and its decoder.

A :class:`Call` is what one method of the client sends (the binding method and its params,
checked before anything is sent) and how the 2xx body that comes back becomes a typed result
or a :class:`~saihm.client.errors.ClientError`. It does no I/O: ``AsyncClient`` and
``Client`` send the request over their transport (saihm/client/_transport.py) and hand the
parsed body to :meth:`Call.result`, so both faces of the client build the same requests and
accept the same answers (saihm-protocol "HTTPS binding" and "Tool surface"; DESIGN.md "HTTP"
for the extension methods and params).

A request builder takes the client method's own arguments (its signature and docstring are
the method's) and returns its :class:`Call`. :class:`Methods` is the table of the client's
methods: one :class:`ClientMethod` line per builder, which both ``AsyncClient`` (awaitable)
and ``Client`` (blocking) inherit. Only saihm_recall and saihm_status, which learn and use the
caller's holderId, are written out on each client. docs/internals.md "Adding an operation".
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, ParamSpec, Self, TypeVar, overload

from pydantic import BaseModel, ValidationError

from saihm.client import _checks, models
from saihm.client._lifecycle import AsyncFace, SyncFace
from saihm.client.errors import ClientError
from saihm.client.models import RecalledCell

__all__ = [
    "Call",
    "ClientMethod",
    "Methods",
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
P = ParamSpec("P")
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
    *,
    namespace: str | None = None,
    supersedes: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Call[models.Remembered]:
    """saihm_remember: store ``content`` as a new cell of the token's session.

    ``namespace`` (extension, default "memory" at the operator) must lie in the token's
    scope. ``supersedes`` (extension) is the cellId of the caller's fact this one
    replaces: the operator forgets that cell in the same change (a REMEMBER and a FORGET
    receipt, or neither), and recall shows the new cell's ``supersedes``. ``metadata``
    (extension) is a JSON object kept beside the text (at most 1 MiB as JSON, and the
    whole request within the operator's request bound): recall returns it as
    ``RecalledCell.metadata``; it is never ranked or shown as content.
    Blank content, a ``supersedes`` that is not 64 hex digits and metadata JSON cannot
    hold are refused before sending.
    """
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
    """saihm_forget: erase one cell; ``success`` false means not found or already erased.

    A result with ``success`` true must name the requested cell, else it is malformed.
    """

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
    *,
    scope: Literal["read", "write", "readwrite"] = "read",
    expiry_epoch: str | int | None = None,
) -> Call[models.Shared]:
    """saihm_share: a contract giving ``grantees`` read access to ``shard_ids``.

    It takes effect for a grantee only once that grantee accepts it
    (:meth:`accept_contract`). Grantee, shard and expiry checks run before sending.
    """
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
    """saihm_revoke_share: end a contract for every grantee (future reads only); an answer
    whose ``revoked`` is not true is malformed."""
    return Call("saihm_revoke_share", {"contractId": contract_id}, _confirmed_revocation)


def governance_propose(
    scope: Literal["emission_param", "protocol_upgrade"],
    param_key: str | None = None,
    proposed_value: str | None = None,
) -> Call[models.Proposed]:
    """saihm_governance_propose, where the operator enables governance; the proposal's shape
    is checked before sending."""
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
    """saihm_governance_vote: the vote recorded (a repeat returns the first vote).

    Compare ``approve`` and ``proposal_id`` with the request: a differing answer means an
    earlier vote stands. An answer with neither weight nor castAtEpoch is malformed.
    """
    params = {"proposalId": proposal_id, "approve": bool(approve)}
    return Call("saihm_governance_vote", params, _confirmed_vote)


# -- extension methods (DESIGN.md "HTTP") -----------------------------------------------------


def accept_contract(contract_id: str) -> Call[models.ContractAnswer]:
    """saihm_accept_contract: the grantee accepts (its cells then appear in recall)."""
    return Call("saihm_accept_contract", {"contractId": contract_id}, _as(models.ContractAnswer))


def decline_contract(contract_id: str) -> Call[models.ContractAnswer]:
    """saihm_decline_contract: the grantee declines, or withdraws an earlier acceptance."""
    return Call("saihm_decline_contract", {"contractId": contract_id}, _as(models.ContractAnswer))


def record(
    kind: RecordKind, content: str, *, metadata: Mapping[str, Any] | None = None
) -> Call[models.Recorded]:
    """saihm_record: append what the agent said ("said") or did ("did") to the session's
    record, or close it ("end", content may be empty). Entries are chained (seq, prev)
    and can never be altered; they come back from ``recall`` with their ``kind``.
    ``metadata`` is kept beside the text as in ``remember``. The kind, the content of a
    "said" or "did" entry and ``metadata`` are checked before sending.
    """
    if kind not in _RECORD_KINDS:
        raise ClientError("refused before sending: kind must be said, did or end", kind="refused")
    if kind != "end":
        _checks.check_content(content)
    params: dict[str, Any] = {"kind": kind, "content": content}
    if metadata is not None:
        params["metadata"] = _checks.check_metadata(metadata)
    return Call("saihm_record", params, _as(models.Recorded))


def forget_session(session_id: str) -> Call[models.SessionForgotten]:
    """saihm_forget_session: erase every cell (memory and record) of one session; every
    receipt stays in the log."""
    return Call("saihm_forget_session", {"sessionId": session_id}, _as(models.SessionForgotten))


# -- the client's methods -----------------------------------------------------------------------


class ClientMethod(Generic[P, R]):
    """A client method made from its request builder: on an ``AsyncClient`` a coroutine
    function, on a ``Client`` a blocking one, each taking the builder's arguments, sending its
    :class:`Call` with the client's ``_send`` and returning the typed result. The method has
    the builder's name, signature and docstring."""

    def __init__(self, build: Callable[P, Call[R]]) -> None:
        self.build = build
        functools.update_wrapper(self, build)
        # The method's signature is the builder's, returning what the Call decodes to.
        signature = inspect.signature(build)
        returns = str(signature.return_annotation)
        if returns.startswith("Call[") and returns.endswith("]"):
            signature = signature.replace(return_annotation=returns[5:-1])
        self.__signature__ = signature

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, obj: AsyncFace, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, R]]: ...

    @overload
    def __get__(self, obj: SyncFace[Any], owner: type[Any]) -> Callable[P, R]: ...

    def __get__(self, obj: Any, owner: type[Any]) -> Any:
        if obj is None:
            return self
        build, send = self.build, obj._send
        if isinstance(obj, AsyncFace):

            async def method(*args: P.args, **kwargs: P.kwargs) -> R:
                result: R = await send(build(*args, **kwargs))
                return result

            return self._named(method)

        def blocking(*args: P.args, **kwargs: P.kwargs) -> R:
            result: R = send(build(*args, **kwargs))
            return result

        return self._named(blocking)

    def _named(self, method: Callable[..., Any]) -> Callable[..., Any]:
        functools.update_wrapper(method, self.build)
        setattr(method, "__signature__", self.__signature__)  # noqa: B010 (a function's slot)
        return method

    def __call__(self, client: Any, *args: Any, **kwargs: Any) -> Any:
        """``Client.remember(client, ...)``, as for a plain method."""
        return self.__get__(client, type(client))(*args, **kwargs)


class Methods:
    """The binding methods both clients expose, one line per request builder (saihm_recall
    and saihm_status are written out on each client: they learn and use the caller's
    holderId)."""

    remember = ClientMethod(remember)
    forget = ClientMethod(forget)
    share = ClientMethod(share)
    revoke_share = ClientMethod(revoke_share)
    governance_propose = ClientMethod(governance_propose)
    governance_vote = ClientMethod(governance_vote)
    accept_contract = ClientMethod(accept_contract)
    decline_contract = ClientMethod(decline_contract)
    record = ClientMethod(record)
    forget_session = ClientMethod(forget_session)
