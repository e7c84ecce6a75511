"""The protocol's business rules for sharing contracts (saihm-protocol "Sharing contracts").

The codec checks structure only; the operator calls ``check_contract_rules`` before signing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from saihm.errors import MalformedInput, rejects

if TYPE_CHECKING:
    from saihm.events.models import Contract

__all__ = ["MAX_TEMPORARY_SECONDS", "MODES", "check_contract_rules", "check_contract_terms"]

MODES = ("TEMPORARY", "PERMANENT", "SYNDICATE")
#: TEMPORARY: expiresAt no later than the contract timestamp plus 86400 seconds.
MAX_TEMPORARY_SECONDS = 86400


@rejects()
def check_contract_terms(
    *,
    grantee_ids: Sequence[bytes],
    shard_ids: Sequence[bytes],
    mode: str,
    scope: str,
    expires_at: int,
    timestamp: int,
) -> None:
    """Apply the protocol's contract rules to proposed terms.

    Raises ``MalformedInput`` with code ``invalid_grantee`` (empty list, an entry not 32 bytes,
    or a duplicate), ``shard_not_found`` (empty list, an entry not 32 bytes, or a duplicate:
    the protocol's only shard code), ``invalid_mode``, ``invalid_scope`` ("write" and
    "readwrite" are reserved; only "read" is defined) or ``invalid_expiry`` (TEMPORARY:
    timestamp < expiresAt <= timestamp + 86400; PERMANENT: expiresAt = 0; SYNDICATE: 0 or later
    than timestamp).
    """
    if not grantee_ids or any(not isinstance(g, bytes) or len(g) != 32 for g in grantee_ids):
        raise MalformedInput("each grantee must be a 32-byte holderId", code="invalid_grantee")
    if len(set(grantee_ids)) != len(grantee_ids):
        raise MalformedInput("a grantee is listed twice", code="invalid_grantee")
    if not shard_ids or any(not isinstance(s, bytes) or len(s) != 32 for s in shard_ids):
        raise MalformedInput("each shard must be a 32-byte cellId", code="shard_not_found")
    if len(set(shard_ids)) != len(shard_ids):
        raise MalformedInput("a shard is listed twice", code="shard_not_found")
    if mode not in MODES:
        raise MalformedInput("mode must be TEMPORARY, PERMANENT or SYNDICATE", code="invalid_mode")
    if scope != "read":
        raise MalformedInput("only the read scope is defined", code="invalid_scope")
    if mode == "TEMPORARY":
        ok = timestamp < expires_at <= timestamp + MAX_TEMPORARY_SECONDS
    elif mode == "PERMANENT":
        ok = expires_at == 0
    else:
        ok = expires_at == 0 or expires_at > timestamp
    if not ok:
        raise MalformedInput(f"expiresAt breaks the {mode} expiry rule", code="invalid_expiry")


@rejects()
def check_contract_rules(contract: Contract, now: int) -> None:
    """``check_contract_terms`` on a ``Contract``; a TEMPORARY or SYNDICATE contract whose
    non-zero expiresAt is not later than ``now`` also fails with ``invalid_expiry``."""
    check_contract_terms(
        grantee_ids=contract.grantee_ids,
        shard_ids=contract.shard_ids,
        mode=contract.mode,
        scope=contract.scope,
        expires_at=contract.expires_at,
        timestamp=contract.timestamp,
    )
    if contract.expires_at != 0 and contract.expires_at <= now:
        raise MalformedInput("the contract has already expired", code="invalid_expiry")
