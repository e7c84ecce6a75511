"""Result checks: what the client may conclude from each operator answer.

One function per tool (saihm-protocol: each tool's "Client checks", and "Client conformance"
4-6 and 9). Each takes the parsed JSON body, which may be anything, and returns the tool's
structured result. Operator strings pass :func:`~saihm.mcp.checks.printable` or
:func:`~saihm.mcp.checks.result_identifier` before they are kept; extensions are ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from saihm.mcp.checks import (
    is_shared_by_other_holder,
    iso_utc,
    parse_bool,
    parse_number,
    printable,
    result_identifier,
)
from saihm.mcp.models import (
    ContractSummary,
    ForgetResult,
    IncomingContractSummary,
    ProposalSummary,
    ProposeResult,
    RecalledCell,
    RecallResult,
    RememberResult,
    RevokeResult,
    ShareResult,
    StatusResult,
    VoteResult,
)

__all__ = [
    "LOG_UNAVAILABLE_ADVICE",
    "check_forget_result",
    "check_propose_result",
    "check_recall_result",
    "check_remember_result",
    "check_revoke_result",
    "check_share_result",
    "check_status_result",
    "check_vote_result",
]

NOT_OBJECT = "malformed response: the result is not a JSON object"
# saihm-protocol "Order of effect and receipt".
LOG_UNAVAILABLE_ADVICE = (
    "the operator's audit log is unavailable: access may already be withdrawn, and the "
    "receipt is pending; repeating the call shows the outcome"
)


def _receipt(body: dict[str, Any]) -> str | None:
    return result_identifier(body.get("receiptId"))


def check_remember_result(body: Any) -> RememberResult:
    """saihm_remember: "stored" only with a valid cellId, else "unconfirmed".

    Optional fields are kept only when present and usable.
    """
    if not isinstance(body, dict):
        return RememberResult(status="unconfirmed", detail=NOT_OBJECT)
    cell_id = result_identifier(body.get("cellId"))
    if cell_id is None:
        return RememberResult(
            status="unconfirmed",
            detail="the result carries no valid cellId, so this memory could not be erased later",
        )
    return RememberResult(
        status="stored",
        cellId=cell_id,
        cellNonce=printable(body.get("cellNonce")),
        tier=printable(body.get("tier")),
        kekVersion=parse_number(body.get("kekVersion")),
        epoch=parse_number(body.get("epoch")),
        signaturePrefix=printable(body.get("signaturePrefix")),
        receiptId=_receipt(body),
    )


def _recalled_cell(element: dict[str, Any], cell_id: str, caller_id: str | None) -> RecalledCell:
    plaintext = element.get("plaintext")
    holder = element.get("holderIdHex")
    timestamp = parse_number(element.get("timestamp"))
    return RecalledCell(
        cellId=cell_id,
        plaintext=plaintext if isinstance(plaintext, str) else None,
        holderIdHex=printable(holder),
        sharedByOtherHolder=is_shared_by_other_holder(holder, caller_id),
        cellNonce=printable(element.get("cellNonce")),
        kekVersion=parse_number(element.get("kekVersion")),
        holderSignaturePrefix=printable(element.get("holderSignaturePrefix")),
        timestamp=timestamp,
        writtenAt=iso_utc(timestamp),
        tier=printable(element.get("tier")),
        kind=printable(element.get("kind")),
        namespace=printable(element.get("namespace")),
        supersedes=result_identifier(element.get("supersedes")),
    )


def check_recall_result(body: Any, query: str | None, caller_id: str | None) -> RecallResult:
    """saihm_recall, in the protocol's order.

    Malformed when the result is not an array, an element is not an object, or an element
    lacks a valid cellId. Then "not_custodial" when no element of a non-empty array carries
    a string plaintext, "incomplete" when only some do, "nothing_matched" for an empty array
    after a non-empty query, "empty" for an empty array otherwise, and "ok".
    """
    known = caller_id is not None
    if not isinstance(body, list):
        return RecallResult(
            status="malformed", callerIdKnown=known, detail="malformed: the result is not an array"
        )
    cells: list[RecalledCell] = []
    for position, element in enumerate(body, start=1):
        if not isinstance(element, dict):
            return RecallResult(
                status="malformed",
                callerIdKnown=known,
                detail=f"malformed: element {position} is not a JSON object",
            )
        cell_id = result_identifier(element.get("cellId"))
        if cell_id is None:
            return RecallResult(
                status="malformed",
                callerIdKnown=known,
                detail=f"malformed: element {position} has no valid cellId and could not be erased",
            )
        cells.append(_recalled_cell(element, cell_id, caller_id))
    if not cells:
        if query:
            return RecallResult(status="nothing_matched", callerIdKnown=known, cells=[])
        return RecallResult(status="empty", callerIdKnown=known, cells=[])
    missing = sum(cell.plaintext is None for cell in cells)
    status: Literal["not_custodial", "incomplete", "ok"]
    if missing == len(cells):
        status = "not_custodial"
    elif missing:
        status = "incomplete"
    else:
        status = "ok"
    return RecallResult(
        status=status, callerIdKnown=known, cells=cells, cellsWithoutPlaintext=missing
    )


def check_forget_result(body: Any, requested_id: str) -> ForgetResult:
    """saihm_forget: an erasure is reported only on a complete result.

    success false is "not_found_or_already_erased"; success absent or not a recognizable
    boolean is "unconfirmed" (the cell may still be stored); success true without a valid
    cellId is "refused"; a valid cellId other than the one requested is "mismatch".
    """
    if not isinstance(body, dict):
        return ForgetResult(status="unconfirmed", requestedId=requested_id, detail=NOT_OBJECT)
    success = parse_bool(body.get("success"))
    if success is None:
        return ForgetResult(
            status="unconfirmed",
            requestedId=requested_id,
            detail="success is absent or not a recognizable boolean",
        )
    if success is False:
        return ForgetResult(status="not_found_or_already_erased", requestedId=requested_id)
    cell_id = result_identifier(body.get("cellId"))
    if cell_id is None:
        return ForgetResult(
            status="refused",
            requestedId=requested_id,
            detail="success is true but the result carries no valid cellId",
        )
    status: Literal["erased", "mismatch"] = "erased" if cell_id == requested_id else "mismatch"
    return ForgetResult(
        status=status,
        requestedId=requested_id,
        cellId=cell_id,
        destructionAnchor=result_identifier(body.get("destructionAnchor")),
        epoch=parse_number(body.get("epoch")),
        receiptId=_receipt(body),
    )


def _list_or_none(value: Any) -> list[Any] | None:
    return value if isinstance(value, list) else None


def _contract(item: dict[str, Any]) -> ContractSummary:
    grantees = _list_or_none(item.get("granteeIds"))
    return ContractSummary(
        contractId=result_identifier(item.get("contractId")),
        mode=printable(item.get("mode")),
        granteeIds=None if grantees is None else [g for g in grantees if printable(g)],
        expiresAt=parse_number(item.get("expiresAt")),
    )


def _incoming(item: dict[str, Any]) -> IncomingContractSummary:
    return IncomingContractSummary(
        contractId=result_identifier(item.get("contractId")),
        holderIdHex=printable(item.get("holderIdHex")),
        mode=printable(item.get("mode")),
        accepted=parse_bool(item.get("accepted")),
        expiresAt=parse_number(item.get("expiresAt")),
    )


def _proposal(item: dict[str, Any]) -> ProposalSummary:
    numbers = ("opens_ts", "closes_ts", "tally_for", "tally_against", "tally_abstain")
    return ProposalSummary(
        propId=result_identifier(item.get("propId")),
        scope=printable(item.get("scope")),
        **{name: parse_number(item.get(name)) for name in numbers},
    )


def _shards(value: Any) -> dict[str, int | float] | None:
    if not isinstance(value, dict):
        return None
    usable = {k: parse_number(v) for k, v in value.items() if printable(k)}
    return {k: v for k, v in usable.items() if v is not None}


def check_status_result(body: Any) -> StatusResult:
    """saihm_status: each field only when present and of usable type; no defaults.

    An absent or unusable agentIdHashHex is ``None`` ("not reported"), never "". An absent
    array is ``None``, never a length of zero. Non-object list items are left out of the
    lists but counted in ``contractCount``, ``incomingContractCount`` and ``governanceCount``.
    ``incomingContracts`` is the operator's extension (contracts naming the caller as grantee);
    ``tokenExpiresAt``, ``tokenSessions`` and ``sessionId`` are its extensions describing the
    caller's token.
    """
    if not isinstance(body, dict):
        return StatusResult(status="malformed", detail=NOT_OBJECT)
    contracts = _list_or_none(body.get("contracts"))
    incoming = _list_or_none(body.get("incomingContracts"))
    governance = _list_or_none(body.get("governance"))
    expires = parse_number(body.get("tokenExpiresAt"))
    sessions = body.get("tokenSessions")
    return StatusResult(
        status="ok",
        agentIdHashHex=result_identifier(body.get("agentIdHashHex")),
        custody=printable(body.get("custody")),
        prs=parse_number(body.get("prs")),
        bfsi_window_start_ts=parse_number(body.get("bfsi_window_start_ts")),
        bfsi_R=parse_number(body.get("bfsi_R")),
        shards=_shards(body.get("shards")),
        contracts=None
        if contracts is None
        else [_contract(c) for c in contracts if isinstance(c, dict)],
        contractCount=None if contracts is None else len(contracts),
        incomingContracts=None
        if incoming is None
        else [_incoming(c) for c in incoming if isinstance(c, dict)],
        incomingContractCount=None if incoming is None else len(incoming),
        governance=None
        if governance is None
        else [_proposal(g) for g in governance if isinstance(g, dict)],
        governanceCount=None if governance is None else len(governance),
        tokenExpiresAt=expires,
        tokenExpiresAtUtc=iso_utc(expires),
        tokenSessions=sessions if sessions in ("one", "all") else None,
        sessionId=result_identifier(body.get("sessionId")),
    )


def check_share_result(body: Any, requested_count: int) -> ShareResult:
    """saihm_share: "shared" only with a valid contractId; a differing granteeCount is flagged."""
    if not isinstance(body, dict):
        return ShareResult(
            status="unconfirmed", requestedGranteeCount=requested_count, detail=NOT_OBJECT
        )
    contract_id = result_identifier(body.get("contractId"))
    if contract_id is None:
        return ShareResult(
            status="unconfirmed",
            requestedGranteeCount=requested_count,
            detail="the result carries no valid contractId; the share is not confirmed",
        )
    count = parse_number(body.get("granteeCount"))
    return ShareResult(
        status="shared",
        contractId=contract_id,
        type=printable(body.get("type")),
        granteeCount=count,
        requestedGranteeCount=requested_count,
        granteeCountMismatch=None if count is None else count != requested_count,
        epoch=parse_number(body.get("epoch")),
        receiptId=_receipt(body),
    )


def check_revoke_result(body: Any, requested_id: str) -> RevokeResult:
    """saihm_revoke_share: only revoked = true (in any accepted form) is a revocation."""
    if not isinstance(body, dict):
        return RevokeResult(
            status="unconfirmed", requestedContractId=requested_id, detail=NOT_OBJECT
        )
    revoked = parse_bool(body.get("revoked"))
    return RevokeResult(
        status="revoked" if revoked is True else "unconfirmed",
        requestedContractId=requested_id,
        revoked=revoked,
        epoch=parse_number(body.get("epoch")),
        receiptId=_receipt(body),
    )


def check_propose_result(body: Any) -> ProposeResult:
    """saihm_governance_propose: "proposed" only with a valid proposalId."""
    if not isinstance(body, dict):
        return ProposeResult(status="unconfirmed", detail=NOT_OBJECT)
    proposal_id = result_identifier(body.get("proposalId"))
    if proposal_id is None:
        return ProposeResult(
            status="unconfirmed",
            detail="the result carries no valid proposalId; the proposal is not confirmed",
        )
    return ProposeResult(
        status="proposed",
        proposalId=proposal_id,
        scope=printable(body.get("scope")),
        paramKey=printable(body.get("paramKey")),
        proposedValue=printable(body.get("proposedValue")),
        snapshotEpoch=parse_number(body.get("snapshotEpoch")),
        proposerHash=result_identifier(body.get("proposerHash")),
        receiptId=_receipt(body),
    )


def check_vote_result(body: Any, proposal_id: str, approve: bool) -> VoteResult:
    """saihm_governance_vote, in the protocol's order of precedence.

    A malformed body is "unknown" (it is unknown whether the vote was counted). Then
    "unconfirmed" if neither weight nor castAtEpoch is present and usable; "mismatch" if the
    returned proposalId or approve differs from the request (an approve that is not a
    recognizable boolean counts as differing); "zero_weight" if weight is 0; else "recorded".
    """
    if not isinstance(body, dict):
        return VoteResult(
            status="unknown",
            detail=NOT_OBJECT,
            requestedProposalId=proposal_id,
            requestedApprove=approve,
        )
    weight = parse_number(body.get("weight"))
    cast_at = parse_number(body.get("castAtEpoch"))
    returned_id = body.get("proposalId")
    returned_approve = parse_bool(body.get("approve"))
    status: Literal["unconfirmed", "mismatch", "zero_weight", "recorded"]
    if weight is None and cast_at is None:
        status = "unconfirmed"
    elif ("proposalId" in body and returned_id != proposal_id) or (
        "approve" in body and returned_approve is not approve
    ):
        status = "mismatch"
    elif weight == 0:
        status = "zero_weight"
    else:
        status = "recorded"
    return VoteResult(
        status=status,
        requestedProposalId=proposal_id,
        requestedApprove=approve,
        proposalId=result_identifier(returned_id),
        voterHash=result_identifier(body.get("voterHash")),
        approve=returned_approve,
        weight=weight,
        castAtEpoch=cast_at,
        receiptId=_receipt(body),
    )
