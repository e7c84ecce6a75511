"""The person's identity actions, shared by the command line and ``saihm authority serve``.

``saihm holder create``, ``session open``, ``session renew``, ``session revoke``, ``grant`` and
``grant revoke`` (saihm/commands/admin.py) and the authority service's JSON calls
(:mod:`saihm.authority.service`) do the same things in the same order with these functions:
a check against the store, the logged change through :class:`~saihm.operator.AdminTools`
(KEY for a new holder, GRANT for a grant, UNGRANT for a revocation; opening and renewing a
session log nothing), then the token the authority signs (:meth:`Authority.issue`). So a
holder, session or grant made over HTTP leaves exactly what the command would have left in the
log (docs/authority.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from saihm.authority.authority import check_token_fits
from saihm.errors import Conflict, ErrorCode, MalformedInput, NotFound
from saihm.events import CapabilityScope

if TYPE_CHECKING:
    from saihm.store import Store

__all__ = [
    "check_grant_token",
    "check_holder",
    "check_renewable",
    "grant_scope",
]


def check_holder(store: Store, holder_id: bytes) -> None:
    """Raise :class:`NotFound` ("no such holder") unless ``holder_id`` is a holder of ``store``."""
    with store.read_txn() as txn:
        if not store.projections.holders.known(txn, holder_id):
            raise NotFound("no such holder", code=ErrorCode.HOLDER_NOT_FOUND)


def check_renewable(store: Store, holder_id: bytes, session_id: bytes) -> None:
    """Refuse to renew a session of an unknown holder (:class:`NotFound`) or a revoked session
    (:class:`Conflict`); nothing is issued or logged then (docs/formats.md "Session
    revocation").

    Sessions are not logged when opened, so a session id that never wrote cannot be told from
    one never opened; renewing it gives the same capability opening a session would, and the
    hint that ``holder create`` prints must work before the agent's first write.
    """
    with store.read_txn() as txn:
        if not store.projections.holders.known(txn, holder_id):
            raise NotFound("no such holder", code=ErrorCode.HOLDER_NOT_FOUND)
        if store.authenticator.revocations.revoked(txn, holder_id, session_id):
            raise Conflict("the session is revoked: open a new one with `saihm session open`")


def grant_scope(namespaces: list[str] | None, grant_id: bytes) -> CapabilityScope:
    """The scope of a grant's token: every session of the holder, in ``namespaces`` (None:
    every namespace). Raises :class:`MalformedInput` for a namespace outside 1..256
    characters."""
    try:
        return CapabilityScope(
            sessions="all",
            namespaces=None if namespaces is None else tuple(namespaces),
            grant_id=grant_id,
        )
    except ValueError as err:
        raise MalformedInput("--namespaces: each namespace is 1 to 256 characters") from err


def check_grant_token(holder_id: bytes, namespaces: list[str] | None, expires_at: int) -> None:
    """Refuse, before GRANT is logged, a grant whose token no server could read
    (:class:`MalformedInput`, "token_too_long")."""
    check_token_fits(holder_id, bytes(32), grant_scope(namespaces, bytes(32)), expires_at)
