"""The eight tool operations: checks before sending, the call, the result check.

Each function returns the tool's structured result for every outcome, including refusal
before sending and transport failure; none raises for an operator's behaviour. Operator
parameters follow saihm-protocol "Tool surface (MCP binding)".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from saihm.client.advice import advice_for
from saihm.mcp.checks import (
    Refused,
    check_content,
    check_expiry_epoch,
    check_grantees,
    check_proposal,
    check_shard_ids,
)
from saihm.mcp.models import (
    ForgetResult,
    ProposeResult,
    RecallResult,
    RememberResult,
    RevokeResult,
    ShareResult,
    StatusResult,
    ToolResult,
    VoteResult,
)
from saihm.mcp.results import (
    LOG_UNAVAILABLE_ADVICE,
    check_forget_result,
    check_propose_result,
    check_recall_result,
    check_remember_result,
    check_revoke_result,
    check_share_result,
    check_status_result,
    check_vote_result,
)
from saihm.mcp.transport import OperatorClient, OperatorFailed, RedirectRefused, TransportError

__all__ = [
    "forget",
    "propose",
    "recall",
    "remember",
    "revoke_share",
    "share",
    "status",
    "vote",
]

R = TypeVar("R", bound=ToolResult)


def failure_result(
    model: type[R], err: Refused | TransportError, *, withdraws_access: bool = False, **ctx: Any
) -> R:
    """The structured result for a call that produced no operator result.

    ``withdraws_access`` marks saihm_forget and saihm_revoke_share, for which
    "operator_log_unavailable" means access was withdrawn and the receipt is pending
    (saihm-protocol "Order of effect and receipt"); those results carry the advice.
    """
    status = "not_sent" if isinstance(err, Refused) else err.outcome
    if model is VoteResult:
        # A failure status means the vote was not counted; a redirect may not come from the
        # operator, so whether it was counted stays unknown.
        if isinstance(err, RedirectRefused):
            status = "unknown"
        elif isinstance(err, OperatorFailed):
            status = "not_counted"
    fields: dict[str, Any] = {"status": status, "detail": str(err), **ctx}
    if isinstance(err, TransportError):
        fields["httpStatus"] = err.http_status
        fields["errorCode"] = err.error_code
        if withdraws_access and err.error_code == "operator_log_unavailable":
            fields["advice"] = LOG_UNAVAILABLE_ADVICE
        elif err.advice is not None:
            fields["advice"] = err.advice
        elif isinstance(err, OperatorFailed) and not isinstance(err, RedirectRefused):
            # A 401 or 403: the likely cause and the person's command that fixes it.
            fields["advice"] = advice_for(err.http_status, err.error_code)
    return model(**fields)


async def _run(
    model: type[R],
    send: Callable[[], Awaitable[Any]],
    check: Callable[[Any], R],
    *,
    withdraws_access: bool = False,
    **ctx: Any,
) -> R:
    try:
        body = await send()
    except (Refused, TransportError) as err:
        return failure_result(model, err, withdraws_access=withdraws_access, **ctx)
    return check(body)


async def remember(
    client: OperatorClient, content: str, supersedes: str | None = None
) -> RememberResult:
    """saihm_remember: refuse blank content before sending, then require a valid cellId.

    ``supersedes`` (the cellId of the fact this one replaces) is sent as the operator's
    extension param of the same name (DESIGN.md); absent, the member is not sent.
    """

    async def send() -> Any:
        params: dict[str, Any] = {"content": check_content(content)}
        if supersedes is not None:
            params["supersedes"] = supersedes
        return await client.call("saihm_remember", params)

    return await _run(RememberResult, send, check_remember_result)


async def status(client: OperatorClient) -> StatusResult:
    """saihm_status; a usable result also sets (or clears) ``client.caller_id``."""
    result = await _run(StatusResult, lambda: client.call("saihm_status", {}), check_status_result)
    if result.status == "ok":
        client.caller_id = result.agentIdHashHex
    return result


async def recall(client: OperatorClient, query: str | None) -> RecallResult:
    """saihm_recall; learns the caller's holderId from saihm_status first when unknown.

    The query member is omitted when absent and sent as "" when empty. If the holderId
    stays unknown every cell is marked as shared by another holder (conformance item 9).
    """
    if client.caller_id is None:
        await status(client)
    params = {} if query is None else {"query": query}
    caller = client.caller_id
    return await _run(
        RecallResult,
        lambda: client.call("saihm_recall", params),
        lambda body: check_recall_result(body, query, caller),
        callerIdKnown=caller is not None,
    )


async def forget(client: OperatorClient, cell_id: str) -> ForgetResult:
    """saihm_forget {"id"}; see :func:`~saihm.mcp.results.check_forget_result`."""
    return await _run(
        ForgetResult,
        lambda: client.call("saihm_forget", {"id": cell_id}),
        lambda body: check_forget_result(body, cell_id),
        withdraws_access=True,
        requestedId=cell_id,
    )


async def share(
    client: OperatorClient,
    grantees: list[str],
    shard_ids: list[str],
    mode: str,
    scope: str,
    expiry_epoch: str | None,
) -> ShareResult:
    """saihm_share: grantee, shard and expiry checks before sending; contractId after."""

    async def send() -> Any:
        params = {
            "granteeIdHashesHex": check_grantees(grantees),
            "shardIds": check_shard_ids(shard_ids),
            "type": mode.lower(),
            "scope": scope,
            "expiryEpoch": check_expiry_epoch(expiry_epoch),
        }
        return await client.call("saihm_share", params)

    return await _run(
        ShareResult,
        send,
        lambda body: check_share_result(body, len(grantees)),
        requestedGranteeCount=len(grantees),
    )


async def revoke_share(client: OperatorClient, contract_id: str) -> RevokeResult:
    """saihm_revoke_share {"contractId"}; only revoked = true is a revocation."""
    return await _run(
        RevokeResult,
        lambda: client.call("saihm_revoke_share", {"contractId": contract_id}),
        lambda body: check_revoke_result(body, contract_id),
        withdraws_access=True,
        requestedContractId=contract_id,
    )


async def propose(
    client: OperatorClient, scope: str, param_key: str | None, proposed_value: str | None
) -> ProposeResult:
    """saihm_governance_propose: emission_param needs both fields; proposalId after."""

    async def send() -> Any:
        check_proposal(scope, param_key, proposed_value)
        params = {"scope": scope, "paramKey": param_key, "proposedValue": proposed_value}
        return await client.call("saihm_governance_propose", params)

    return await _run(ProposeResult, send, check_propose_result)


async def vote(client: OperatorClient, proposal_id: str, approve: bool) -> VoteResult:
    """saihm_governance_vote {"proposalId", "approve"}; see ``check_vote_result``."""
    return await _run(
        VoteResult,
        lambda: client.call(
            "saihm_governance_vote", {"proposalId": proposal_id, "approve": approve}
        ),
        lambda body: check_vote_result(body, proposal_id, approve),
        requestedProposalId=proposal_id,
        requestedApprove=approve,
    )
