"""The person's identity actions, shared by the command line and ``saihm authority serve``.

``saihm holder create``, ``session open``, ``session renew``, ``session revoke``, ``grant`` and
``grant revoke`` (saihm/commands/admin.py) and the authority service's JSON calls
(:mod:`saihm.services.authority`) do the same things in the same order with these functions:
a check against the store, the logged change through :class:`~saihm.operator.AdminTools`
(KEY for a new holder, GRANT for a grant, UNGRANT for a revocation; opening and renewing a
session log nothing), then the token the authority signs (:meth:`Authority.issue`). So a
holder, session or grant made over HTTP leaves exactly what the command would have left in the
log (docs/authority.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from saihm.authority.authority import Authority, check_token_fits
from saihm.errors import Conflict, ErrorCode, MalformedInput, NotFound
from saihm.events import CapabilityScope
from saihm.names import check_namespace

if TYPE_CHECKING:
    from saihm.storage import ReadTxn
    from saihm.store import Store

__all__ = [
    "check_grant_token",
    "check_holder",
    "check_renewable",
    "check_revocable",
    "grant_scope",
]


def check_holder(store: Store, holder_id: bytes) -> None:
    """Raise :class:`NotFound` ("no such holder") unless ``holder_id`` is a holder of ``store``."""
    if not store.holder_known(holder_id):
        raise NotFound("no such holder", code=ErrorCode.HOLDER_NOT_FOUND)


def _belongs(
    store: Store, txn: ReadTxn, authority: Authority, holder_id: bytes, given: bytes
) -> bool:
    """Whether ``given`` (a sessionId or tokenId) is known to be ``holder_id``'s: minted for
    it by ``authority``, a session that wrote under it (its cells are indexed by a tag of
    holder and session), or one already revoked for it."""
    if authority.minted(holder_id, given):
        return True
    q = store.ask(txn)
    if len(given) == 32 and q.session_wrote(holder_id, given):
        return True
    return q.revoked(holder_id, given)


def _not_holders(what: str) -> NotFound:
    return NotFound(f"the holder has no {what} with that id", code=ErrorCode.NOT_FOUND)


def check_renewable(
    store: Store, authority: Authority, holder_id: bytes, session_id: bytes
) -> None:
    """Refuse to renew a session of an unknown holder (:class:`NotFound`,
    ``holder_not_found``), a session that is not the holder's (:class:`NotFound`,
    ``not_found``) or a revoked session (:class:`Conflict`); nothing is issued or logged then
    (docs/formats.md "Session revocation", docs/authority.md "Ids belong to their holder").

    Sessions are not logged when opened; the authority binds each sessionId it mints to its
    holder (:meth:`Authority.minted`), so a session that never wrote can still be renewed,
    and the hint that ``holder create`` prints works before the agent's first write.
    """
    with store.read_txn() as txn:
        if not store.ask(txn).holder_known(holder_id):
            raise NotFound("no such holder", code=ErrorCode.HOLDER_NOT_FOUND)
        if not _belongs(store, txn, authority, holder_id, session_id):
            raise _not_holders("session")
        if store.authenticator.revocations.revoked(txn, holder_id, session_id):
            raise Conflict("the session is revoked: open a new one with `saihm session open`")


def check_revocable(store: Store, authority: Authority, holder_id: bytes, given: bytes) -> None:
    """Refuse, before UNGRANT is logged, to revoke a sessionId (32 bytes) or tokenId (16
    bytes) that is not ``holder_id``'s: :class:`NotFound` (``holder_not_found`` for an unknown
    holder, ``not_found`` for another holder's id or one never minted). A revocation keyed by
    the wrong holder would leave the real session working while answering "revoked"."""
    if len(given) not in (16, 32):
        raise MalformedInput("give a tokenId (32 hex) or a sessionId (64 hex)")
    with store.read_txn() as txn:
        if not store.ask(txn).holder_known(holder_id):
            raise NotFound("no such holder", code=ErrorCode.HOLDER_NOT_FOUND)
        if not _belongs(store, txn, authority, holder_id, given):
            raise _not_holders("session" if len(given) == 32 else "token")


def grant_scope(namespaces: list[str] | None, grant_id: bytes) -> CapabilityScope:
    """The scope of a grant's token: every session of the holder, in ``namespaces`` (None:
    every namespace). Raises :class:`~saihm.names.BadNamespace` for a namespace that is not a
    name (docs/formats.md "Namespaces")."""
    for namespace in namespaces or ():
        check_namespace(namespace)
    try:
        return CapabilityScope(
            sessions="all",
            namespaces=None if namespaces is None else tuple(namespaces),
            grant_id=grant_id,
        )
    except ValueError as err:
        raise MalformedInput("--namespaces: each namespace is 1 to 256 characters") from err


def check_grant_token(holder_id: bytes, namespaces: list[str] | None, expires_at: int) -> None:
    """Refuse, before GRANT is logged, a grant naming a namespace that is not a name
    (:class:`~saihm.names.BadNamespace`) or whose token no server could read
    (:class:`MalformedInput`, "token_too_long")."""
    check_token_fits(holder_id, bytes(32), grant_scope(namespaces, bytes(32)), expires_at)
