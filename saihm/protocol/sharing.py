"""The sharing family of the binding: saihm_share, saihm_revoke_share and the extension
methods saihm_accept_contract and saihm_decline_contract, over ``operator.sharing``
(:class:`saihm.operator.sharing.SharingTools`).

Each method's params parser, renderer (the tool's "Result") and :class:`Binding` row live
here together; :data:`ROWS` is what :mod:`saihm.protocol.binding` gathers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from saihm.errors import ErrorCode, MalformedInput
from saihm.events.operations import METHODS
from saihm.operator.sharing import MODES, Responded, Revoked, Shared
from saihm.protocol import params as P
from saihm.protocol.family import Binding, id_param, plain
from saihm.protocol.params import dec, hx

if TYPE_CHECKING:
    from saihm.config import Config

__all__ = ["ROWS", "render_responded", "render_revoked", "render_shared"]


# -- params ----------------------------------------------------------------------------------


def _share_params(
    params: dict[str, Any], config: Config
) -> tuple[list[bytes], list[bytes], str, str, int | None]:
    names = {"granteeIdHashesHex", "shardIds", "type", "scope", "expiryEpoch"}
    p = P.check_params(params, names, names - {"expiryEpoch"})
    # Each member's defect answers the protocol's code for that member (saihm_share
    # "Errors"), so a client never meets an extension code it cannot interpret.
    grantees = [
        P.id32(
            g[2:] if g[:2] in ("0x", "0X") else g, code=ErrorCode.INVALID_GRANTEE, what="grantee"
        )
        for g in P.string_list(p, "granteeIdHashesHex", code=ErrorCode.INVALID_GRANTEE)
    ]
    shards = [
        P.id32(s, code=ErrorCode.SHARD_NOT_FOUND, what="shard")
        for s in P.string_list(p, "shardIds", code=ErrorCode.SHARD_NOT_FOUND)
    ]
    kind = P.text(p, "type", code=ErrorCode.INVALID_MODE)
    mode = MODES.get(kind) if isinstance(kind, str) else None
    if mode is None:
        raise MalformedInput(
            "type must be temporary, permanent or syndicate", code=ErrorCode.INVALID_MODE
        )
    scope = P.text(p, "scope", code=ErrorCode.INVALID_SCOPE)
    expiry = P.epoch(p.get("expiryEpoch"), "expiryEpoch")
    return grantees, shards, mode, scope, expiry


_CONTRACT_ID = id_param("contractId", ErrorCode.CONTRACT_NOT_FOUND)


# -- results ---------------------------------------------------------------------------------


def render_shared(r: Shared) -> dict[str, object]:
    """saihm_share "Result"."""
    return {
        "contractId": hx(r.contract_id),
        "type": r.mode.lower(),
        "granteeCount": r.grantee_count,
        "epoch": dec(r.epoch),
        "expiresAt": dec(r.expires_at),
        "receiptId": hx(r.receipt_id),
    }


def render_revoked(r: Revoked) -> dict[str, object]:
    """saihm_revoke_share "Result"; a repeat carries no ``receiptId``."""
    out: dict[str, object] = {"revoked": True, "epoch": dec(r.epoch)}
    if r.receipt_id is not None:
        out["receiptId"] = hx(r.receipt_id)
    return out


def render_responded(r: Responded) -> dict[str, object]:
    """saihm_accept_contract / saihm_decline_contract; a repeat carries no ``receiptId``."""
    out: dict[str, object] = {"contractId": hx(r.contract_id), "accepted": r.accepted}
    if r.receipt_id is not None:
        out["receiptId"] = hx(r.receipt_id)
    return out


# -- the rows --------------------------------------------------------------------------------

ROWS: tuple[Binding[Any, Any], ...] = (
    Binding(
        METHODS["saihm_share"],
        _share_params,
        lambda op, access, a: op.sharing.share(access, *a),
        plain(render_shared),
    ),
    Binding(
        METHODS["saihm_revoke_share"],
        _CONTRACT_ID,
        lambda op, access, contract_id: op.sharing.revoke_share(access, contract_id),
        plain(render_revoked),
    ),
    Binding(
        METHODS["saihm_accept_contract"],
        _CONTRACT_ID,
        lambda op, access, contract_id: op.sharing.respond(access, contract_id, accept=True),
        plain(render_responded),
    ),
    Binding(
        METHODS["saihm_decline_contract"],
        _CONTRACT_ID,
        lambda op, access, contract_id: op.sharing.respond(access, contract_id, accept=False),
        plain(render_responded),
    ),
)
