"""``Admin`` and ``AsyncAdmin``: clients of the authority service (``saihm authority serve``).

They create holders, open, renew and revoke sessions, and make and withdraw a person's
cross-session grants over the service's pinned paths (docs/authority.md), with the transport
rules of :class:`~saihm.client.Client` (https only, plain http to 127.0.0.1 or localhost; no
redirects; a timeout; a bounded response). The admin credential is sent as ``Authorization:
Bearer <credential>`` and never shown, nor is any token in a result's ``repr``. The credential
belongs to the application's back end: an agent gets only the tokens.

    from saihm.client import Admin, Client

    with Admin("http://127.0.0.1:8090/", credential) as admin:
        user = admin.create_holder()
        with Client("http://127.0.0.1:8080/", "Bearer " + user.token) as client:
            client.remember("the tea is green")
        fresh = admin.renew_session(user.holder_id, user.session_id)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from saihm.client._core import parse
from saihm.client._lifecycle import AsyncFace, SyncFace, open_target
from saihm.client._transport import DEFAULT_TIMEOUT_SECONDS, MAX_RESPONSE_BYTES
from saihm.client.errors import ClientError

__all__ = [
    "Admin",
    "AsyncAdmin",
    "Issued",
    "PersonLink",
    "RevokedGrant",
    "RevokedSession",
    "TokenScope",
]

M = TypeVar("M", bound=BaseModel)

#: A ``Bearer`` scheme pasted with the credential (it is added once, here).
_BEARER = re.compile(r"^bearer(?:\s+|$)", re.IGNORECASE)


class _Answer(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True
    )


class TokenScope(_Answer):
    """What a token sees: ``sessions`` "one" (``session_id``) or "all" (a grant,
    ``grant_id``); ``namespaces`` None for every namespace."""

    sessions: str
    session_id: str | None = None
    grant_id: str | None = None
    namespaces: list[str] | None = None


class Issued(_Answer):
    """A token the authority issued, with what it sees and when it expires.

    ``holder_id`` is set by create_holder, ``session_id`` by create_holder, open_session and
    renew_session, ``grant_id`` by grant. ``expires_at`` is UNIX seconds; ``expires`` the
    same instant as an aware UTC datetime. ``token`` is the bearer token (a secret, kept out
    of ``repr``); give an agent ``"Bearer " + token``.
    """

    token: str = Field(repr=False)
    scope: TokenScope
    expires_at: int
    expires_at_utc: str
    holder_id: str | None = None
    session_id: str | None = None
    grant_id: str | None = None

    @property
    def expires(self) -> datetime:
        """When the token stops working (UTC)."""
        return datetime.fromtimestamp(self.expires_at, UTC)


class RevokedSession(_Answer):
    """revoke_session: ``changed`` is False when it was revoked already."""

    holder_id: str
    id: str
    revoked: bool
    changed: bool


class RevokedGrant(_Answer):
    """revoke_grant: ``changed`` is False when it was withdrawn already."""

    grant_id: str
    revoked: bool
    changed: bool


class PersonLink(_Answer):
    """person_link: the one-time link that lets the person enrol a passkey at the operator's
    ``/me/`` page. ``url`` is a secret until used (its one-time code is in the fragment) and
    is kept out of ``repr``; ``expires_at`` is UNIX seconds."""

    url: str = Field(repr=False)
    expires_at: int
    expires_at_utc: str


def _ttl(ttl: int | None) -> dict[str, int]:
    if ttl is None:
        return {}
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
        raise ClientError("ttl must be a positive number of seconds", kind="refused")
    return {"ttl": ttl}


class AsyncAdmin(AsyncFace):
    """An asyncio client of the authority service at ``endpoint`` (its root URL) with the
    admin ``credential`` (the content of the authority directory's ``admin.credential``).

    Every method returns a typed answer or raises :class:`~saihm.client.ClientError`, whose
    ``operator_code`` is the service's error code (``"unauthenticated"`` for a wrong
    credential, ``"holder_not_found"``, ``"conflict"`` for renewing a revoked session, ...).
    """

    def __init__(
        self,
        endpoint: str,
        credential: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        ca_file: str | None = None,
        tls_pin_sha256: str | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        secret = credential.strip() if isinstance(credential, str) else credential
        if isinstance(secret, str):
            secret = _BEARER.sub("", secret, count=1)
        super().__init__(
            open_target(
                endpoint,
                f"Bearer {secret}" if secret else None,
                names=("endpoint", "credential"),
                timeout=timeout,
                ca_file=ca_file,
                tls_pin_sha256=tls_pin_sha256,
                max_response_bytes=max_response_bytes,
                root_only=True,
            )
        )

    def __repr__(self) -> str:
        return f"AsyncAdmin({self._target.where!r})"

    async def _call(self, path: str, payload: dict[str, Any], model: type[M]) -> M:
        body = await self._post(payload, path)
        return parse(model, body, path)

    async def create_holder(self, *, ttl: int | None = None) -> Issued:
        """A new holder (a user) and a token for its first session (``saihm holder
        create``); ``ttl`` in seconds, default the service's (30 days)."""
        return await self._call("v1/holders", _ttl(ttl), Issued)

    async def open_session(self, holder_id: str, *, ttl: int | None = None) -> Issued:
        """A token for a new session of ``holder_id`` (``saihm session open``)."""
        return await self._call("v1/sessions", {"holderId": holder_id, **_ttl(ttl)}, Issued)

    async def renew_session(
        self, holder_id: str, session_id: str, *, ttl: int | None = None
    ) -> Issued:
        """A fresh token for the same session, so the agent keeps its memory (``saihm session
        renew``); refused (``conflict``) for a revoked session and (``not_found``) for a
        session that is not the holder's."""
        payload = {"holderId": holder_id, "sessionId": session_id, **_ttl(ttl)}
        return await self._call("v1/sessions/renew", payload, Issued)

    async def revoke_session(
        self, holder_id: str, session_id: str | None = None, *, token_id: str | None = None
    ) -> RevokedSession:
        """Revoke every token of a session, or one token by ``token_id`` (``saihm session
        revoke``); the operator refuses them from then on. An id that is not the holder's is
        refused (``not_found``) with nothing logged."""
        if (session_id is None) == (token_id is None):
            raise ClientError("give exactly one of session_id and token_id", kind="refused")
        which = {"sessionId": session_id} if session_id is not None else {"tokenId": token_id}
        return await self._call(
            "v1/sessions/revoke", {"holderId": holder_id, **which}, RevokedSession
        )

    async def grant(
        self, holder_id: str, *, namespaces: list[str] | None = None, ttl: int | None = None
    ) -> Issued:
        """A person's grant: a token that recalls across every session of ``holder_id`` (in
        ``namespaces``, default all) for ``ttl`` seconds (default 30 days); ``saihm grant
        --sessions all``. Logged as GRANT."""
        payload: dict[str, Any] = {"holderId": holder_id, **_ttl(ttl)}
        if namespaces is not None:
            payload["namespaces"] = list(namespaces)
        return await self._call("v1/grants", payload, Issued)

    async def revoke_grant(self, grant_id: str) -> RevokedGrant:
        """Withdraw a grant (``saihm grant revoke``); its tokens stop working. Logged as
        UNGRANT."""
        return await self._call("v1/grants/revoke", {"grantId": grant_id}, RevokedGrant)

    async def person_link(self, holder_id: str, *, ttl: int | None = None) -> PersonLink:
        """A one-time link (single use, at most 24 hours, default 24) that opens the
        operator's ``/me/`` page to enrol a passkey for ``holder_id``. Give it to the person
        only; a person who lost every passkey gets a new one the same way. Logs nothing."""
        return await self._call("v1/person-links", {"holderId": holder_id, **_ttl(ttl)}, PersonLink)


class Admin(SyncFace[AsyncAdmin]):
    """The synchronous face of :class:`AsyncAdmin`: same arguments, methods and answers. Each
    call runs on a private event loop in one daemon thread (as :class:`~saihm.client.Client`
    does), so it works from scripts, threads and code already inside an event loop."""

    def __init__(
        self,
        endpoint: str,
        credential: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        ca_file: str | None = None,
        tls_pin_sha256: str | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        super().__init__(
            AsyncAdmin(
                endpoint,
                credential,
                timeout=timeout,
                ca_file=ca_file,
                tls_pin_sha256=tls_pin_sha256,
                max_response_bytes=max_response_bytes,
            ),
            "saihm-admin",
        )

    def __repr__(self) -> str:
        return f"Admin({self._async._target.where!r})"

    def create_holder(self, *, ttl: int | None = None) -> Issued:
        """See :meth:`AsyncAdmin.create_holder`."""
        return self._run(self._async.create_holder(ttl=ttl))

    def open_session(self, holder_id: str, *, ttl: int | None = None) -> Issued:
        """See :meth:`AsyncAdmin.open_session`."""
        return self._run(self._async.open_session(holder_id, ttl=ttl))

    def renew_session(self, holder_id: str, session_id: str, *, ttl: int | None = None) -> Issued:
        """See :meth:`AsyncAdmin.renew_session`."""
        return self._run(self._async.renew_session(holder_id, session_id, ttl=ttl))

    def revoke_session(
        self, holder_id: str, session_id: str | None = None, *, token_id: str | None = None
    ) -> RevokedSession:
        """See :meth:`AsyncAdmin.revoke_session`."""
        return self._run(self._async.revoke_session(holder_id, session_id, token_id=token_id))

    def grant(
        self, holder_id: str, *, namespaces: list[str] | None = None, ttl: int | None = None
    ) -> Issued:
        """See :meth:`AsyncAdmin.grant`."""
        return self._run(self._async.grant(holder_id, namespaces=namespaces, ttl=ttl))

    def revoke_grant(self, grant_id: str) -> RevokedGrant:
        """See :meth:`AsyncAdmin.revoke_grant`."""
        return self._run(self._async.revoke_grant(grant_id))

    def person_link(self, holder_id: str, *, ttl: int | None = None) -> PersonLink:
        """See :meth:`AsyncAdmin.person_link`."""
        return self._run(self._async.person_link(holder_id, ttl=ttl))
