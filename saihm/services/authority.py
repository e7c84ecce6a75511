"""``saihm authority serve``: the authority's JSON service (docs/authority.md).

Its own process, with the authority's key directory, on its own port: the operator
(``saihm serve``) still holds only the authority's public key and never mints a token. An
admin credential, made on first start in the authority directory (file mode 0600) and read
there by the person who runs the operator, authorises every call as ``Authorization: Bearer
<credential>``. The service keeps only its SHA-256 and compares digests in constant time.

The calls (pinned paths; JSON in and out, ``{"error": code}`` on failure):

- ``POST /v1/holders`` ``{"ttl"?}`` — ``saihm holder create``;
- ``POST /v1/sessions`` ``{"holderId", "ttl"?}`` — ``saihm session open``;
- ``POST /v1/sessions/renew`` ``{"holderId", "sessionId", "ttl"?}`` — ``saihm session renew``;
- ``POST /v1/sessions/revoke`` ``{"holderId", "sessionId" | "tokenId"}`` — ``saihm session
  revoke``;
- ``POST /v1/grants`` ``{"holderId", "namespaces"?, "ttl"?}`` — ``saihm grant``;
- ``POST /v1/grants/revoke`` ``{"grantId"}`` — ``saihm grant revoke``;
- ``POST /v1/person-links`` ``{"holderId", "ttl"?}`` — ``saihm person-link``: a one-time link
  that enrols the person's passkey at ``--operator-url``'s ``/me/``
  (:mod:`saihm.authority.person`);
- ``GET /v1/health`` — ``{"status": "ok"}``, without credential.

Each call does what its command does, with the same functions (saihm.authority.actions,
saihm.operator.AdminTools, :meth:`Authority.issue`), so the log holds the same events; an
answer that issues a token carries the command's JSON keys (``scope``, ``expiresAt``,
``expiresAtUtc``). Neither the credential nor a token is ever written to a log or put in an
error: aiohttp's access log is off, the access-log middleware writes method, path, status and
duration, and parser refusals are answered by :class:`~saihm.http.guard.GuardedAppRunner`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import ValidationError

from saihm.authority.actions import (
    check_grant_token,
    check_holder,
    check_renewable,
    check_revocable,
    grant_scope,
)
from saihm.authority.authority import Authority
from saihm.authority.bodies import (
    Body,
    GrantBody,
    GrantRevokeBody,
    HolderBody,
    PersonLinkBody,
    RenewBody,
    RevokeBody,
    SessionBody,
)
from saihm.authority.continuity import token_fields
from saihm.authority.credential import (
    CREDENTIAL_FILE,
    check_credential,
    load_or_create_credential,
)
from saihm.authority.person import LINK_TTL_MAX
from saihm.config import Config
from saihm.errors import ErrorCode, MalformedInput, SaihmError, TooLarge
from saihm.events import Capability, CapabilityScope
from saihm.http.listen import LOOPBACK, bind, tls_context

if TYPE_CHECKING:
    from saihm.operator import Operator

__all__ = ["AuthorityService", "create_authority_app", "main"]

log = logging.getLogger("saihm.authority")

#: Where the person's page is, unless ``--operator-url`` says (``saihm serve``'s default).
DEFAULT_OPERATOR_URL = "http://localhost:8080/"

#: A request body is a few ids and namespaces.
MAX_BODY = 64 * 1024

SERVICE: web.AppKey[AuthorityService] = web.AppKey("saihm.authority.service")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AuthorityService:
    """The authority's calls over one long-lived operator (store) and the authority key; the
    store is used from one thread (``executor``), as a command would use it."""

    def __init__(
        self,
        operator: Operator,
        authority: Authority,
        credential_sha256: bytes,
        token_ttl: int,
        operator_url: str = DEFAULT_OPERATOR_URL,
    ) -> None:
        from saihm.authority.person import PersonState, operator_origin

        operator_origin(operator_url)  # refuse a URL no passkey could bind to, at start
        self.operator_url = operator_url
        self.person = PersonState(operator.store)
        self.operator = operator
        self.authority = authority
        self.credential_sha256 = credential_sha256
        self.token_ttl = token_ttl
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="saihm-authority")

    def _issued(
        self, holder_id: bytes, session_id: bytes, scope: CapabilityScope, ttl: int | None
    ) -> tuple[Capability, dict[str, object]]:
        cap = self.authority.issue(holder_id, session_id, scope, ttl or self.token_ttl)
        return cap, {"token": cap.to_token(), **token_fields(cap)}

    def create_holder(self, body: HolderBody) -> dict[str, object]:
        """``saihm holder create``: log the KEY receipt, then a token for a new session."""
        holder_id = self.operator.admin.create_holder()
        session_id = self.authority.session_id(holder_id)
        cap, fields = self._issued(holder_id, session_id, CapabilityScope(), body.ttl)
        _audit("holder_created", cap)
        return {"holderId": holder_id.hex(), "sessionId": session_id.hex(), **fields}

    def open_session(self, body: SessionBody) -> dict[str, object]:
        """``saihm session open``: a token for a new session of a known holder."""
        holder_id = bytes.fromhex(body.holderId)
        check_holder(self.operator.store, holder_id)
        session_id = self.authority.session_id(holder_id)
        cap, fields = self._issued(holder_id, session_id, CapabilityScope(), body.ttl)
        _audit("session_opened", cap)
        return {"sessionId": session_id.hex(), **fields}

    def renew_session(self, body: RenewBody) -> dict[str, object]:
        """``saihm session renew``: a fresh token for the same session, unless revoked."""
        holder_id, session_id = bytes.fromhex(body.holderId), bytes.fromhex(body.sessionId)
        check_renewable(self.operator.store, self.authority, holder_id, session_id)
        cap, fields = self._issued(holder_id, session_id, CapabilityScope(), body.ttl)
        _audit("session_renewed", cap)
        return {"sessionId": session_id.hex(), **fields}

    def revoke_session(self, body: RevokeBody) -> dict[str, object]:
        """``saihm session revoke``: log UNGRANT for the session's (or one token's) tokens;
        refused (404, nothing logged) for an id that is not the holder's."""
        given = [i for i in (body.sessionId, body.tokenId) if i is not None]
        if len(given) != 1:
            raise MalformedInput("give exactly one of sessionId and tokenId")
        holder_id, revoked = bytes.fromhex(body.holderId), bytes.fromhex(given[0])
        check_revocable(self.operator.store, self.authority, holder_id, revoked)
        changed = self.operator.admin.revoke_session(holder_id, revoked)
        record = {"event": "session_revoked", "holderId": holder_id.hex(), "id": revoked.hex()}
        log.info(json.dumps(record))
        return {
            "holderId": holder_id.hex(),
            "id": revoked.hex(),
            "revoked": True,
            "changed": changed,
        }

    def grant(self, body: GrantBody) -> dict[str, object]:
        """``saihm grant --sessions all``: log GRANT, then the grant's token (one expiry)."""
        holder_id = bytes.fromhex(body.holderId)
        ttl = body.ttl or self.token_ttl
        now = int(time.time())
        check_grant_token(holder_id, body.namespaces, now + ttl)
        grant_id, _ = self.operator.admin.grant(holder_id, body.namespaces, now + ttl)
        scope = grant_scope(body.namespaces, grant_id)
        session_id = self.authority.session_id(holder_id)
        cap = self.authority.issue(holder_id, session_id, scope, ttl, now=now)
        _audit("grant_made", cap)
        return {"grantId": grant_id.hex(), "token": cap.to_token(), **token_fields(cap)}

    def revoke_grant(self, body: GrantRevokeBody) -> dict[str, object]:
        """``saihm grant revoke``: log UNGRANT for the grant."""
        grant_id = bytes.fromhex(body.grantId)
        changed = self.operator.admin.ungrant(grant_id)
        log.info(json.dumps({"event": "grant_revoked", "grantId": grant_id.hex()}))
        return {"grantId": grant_id.hex(), "revoked": True, "changed": changed}

    def person_link(self, body: PersonLinkBody) -> dict[str, object]:
        """A one-time link that enrols a passkey for the holder at the operator's ``/me/``."""
        holder_id = bytes.fromhex(body.holderId)
        answer = self.person.mint_link(holder_id, self.operator_url, body.ttl or LINK_TTL_MAX)
        record = {"event": "person_link", "holderId": holder_id.hex()}
        log.info(json.dumps({**record, "expiresAt": answer["expiresAt"]}))
        return {
            "url": answer["url"],
            "expiresAtUtc": answer["expiresAtUtc"],
            "expiresAt": answer["expiresAt"],
        }


def _audit(event: str, cap: Capability) -> None:
    """One log line per issued token: ids and expiry, never the token."""
    record: dict[str, object] = {
        "event": event,
        "holderId": cap.holder_id.hex(),
        "tokenId": cap.token_id.hex(),
        "expiresAt": cap.expires_at,
    }
    if cap.scope.grant_id is not None:
        record["grantId"] = cap.scope.grant_id.hex()
    elif cap.session_id is not None:
        record["sessionId"] = cap.session_id.hex()
    log.info(json.dumps(record))


def _json(body: object, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(body, separators=(",", ":")),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def _error(status: int, code: str) -> web.Response:
    return _json({"error": code}, status)


_CALLS: dict[str, tuple[type[Body], str]] = {
    "/v1/holders": (HolderBody, "create_holder"),
    "/v1/sessions": (SessionBody, "open_session"),
    "/v1/sessions/renew": (RenewBody, "renew_session"),
    "/v1/sessions/revoke": (RevokeBody, "revoke_session"),
    "/v1/grants": (GrantBody, "grant"),
    "/v1/grants/revoke": (GrantRevokeBody, "revoke_grant"),
    "/v1/person-links": (PersonLinkBody, "person_link"),
}


def _parse(raw: bytes) -> object:
    def constant(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    return json.loads(raw.decode("utf-8"), parse_constant=constant)


async def _call(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    check_credential(request.headers.get("Authorization", ""), service.credential_sha256)
    model, method = _CALLS[request.path]
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as err:
        raise TooLarge("the body is too large") from err
    try:
        body = model.model_validate(_parse(raw) if raw.strip() else {})
    except (ValueError, RecursionError) as err:  # ValidationError is a ValueError
        kind = "fields" if isinstance(err, ValidationError) else "JSON"
        raise MalformedInput(f"the body is not valid {kind}") from err
    loop = asyncio.get_running_loop()
    answer = await loop.run_in_executor(service.executor, getattr(service, method), body)
    return _json(answer)


async def _health(request: web.Request) -> web.Response:
    return _json({"status": "ok"})


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure is ``{"error": code}``; a bug is a 500 whose log line names only the
    exception's class (its text could quote a body)."""
    try:
        return await handler(request)
    except SaihmError as err:
        return _error(err.status, err.code)
    except web.HTTPException as err:
        code = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}.get(
            err.status, ErrorCode.BAD_REQUEST
        )
        return _error(err.status, code)
    except Exception as err:
        log.error("internal error: %s", type(err).__name__)
        return _error(500, ErrorCode.INTERNAL)


@web.middleware
async def _access_log(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Method, path, status and milliseconds; never a header or a body."""
    started = time.monotonic()
    response = await handler(request)
    took = (time.monotonic() - started) * 1000
    path = request.path if request.path in _CALLS or request.path == "/v1/health" else "-"
    log.info("%s %s %d %.1fms", request.method, path, response.status, took)
    return response


def create_authority_app(service: AuthorityService) -> web.Application:
    """The service's aiohttp app (the executor is shut down on cleanup)."""
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_access_log, _errors])
    app[SERVICE] = service
    for path in _CALLS:
        app.router.add_post(path, _call)
    app.router.add_get("/v1/health", _health)

    async def stop_executor(app: web.Application) -> None:
        service.executor.shutdown(wait=True)

    app.on_cleanup.append(stop_executor)
    return app


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT``; :class:`MalformedInput` otherwise."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise MalformedInput("--listen must be HOST:PORT (port 0..65535)")
    return host, int(port)


@dataclass(frozen=True)
class ServiceOptions:
    """What ``saihm authority serve`` was asked for (saihm.commands.authority parses it)."""

    config: Config
    listen: str = "127.0.0.1:8090"
    tls_cert: str | None = None
    tls_key: str | None = None
    operator_url: str = DEFAULT_OPERATOR_URL


def _open(
    config: Config, operator_url: str = DEFAULT_OPERATOR_URL
) -> tuple[AuthorityService, bool]:
    """The service over the data directory and the authority's key; refuses an authority
    whose public key is not the one the data directory's operator pins."""
    from saihm.compose import open_operator

    authority = Authority.open(config.authority_dir)
    pinned = config.authority_public_key_file.read_bytes()
    if not hmac.compare_digest(pinned, authority.public_key):
        raise MalformedInput(
            f"the authority in {config.authority_dir} is not the one {config.data_dir} trusts "
            f"({config.authority_public_key_file}); its tokens would be refused"
        )
    credential, created = load_or_create_credential(config.authority_dir)
    operator = open_operator(config, checkpointer=False)
    try:
        service = AuthorityService(operator, authority, credential, config.token_ttl, operator_url)
    except BaseException:
        operator.store.close()
        raise
    return service, created


async def _serve(service: AuthorityService, sock: Any, context: Any) -> None:
    from saihm.http.guard import serve_until_signalled

    await serve_until_signalled(create_authority_app(service), sock, context)


def main(options: ServiceOptions) -> int:
    """Run ``saihm authority serve`` until SIGTERM or SIGINT; 2 for bad arguments."""
    from saihm.logs import configure_logging

    configure_logging(sys.stderr)
    try:
        host, port = parse_listen(options.listen)
        tls = bool(options.tls_cert or options.tls_key)
        if tls and not (options.tls_cert and options.tls_key):
            raise MalformedInput("give both --tls-cert and --tls-key")
        if not tls and host not in LOOPBACK:
            raise MalformedInput(
                f"refusing plain http on {host}: give --tls-cert and --tls-key, "
                "or listen on 127.0.0.1, localhost or ::1"
            )
        context = (
            tls_context(options.tls_cert, options.tls_key)
            if options.tls_cert and options.tls_key
            else None
        )
        from saihm.authority.person import operator_origin

        operator_origin(options.operator_url)
        service, created = _open(options.config, options.operator_url)
    except SaihmError as err:
        from saihm.storage.url import scrub

        raise SaihmError(scrub(str(err), options.config.store)) from err
    try:
        sock = bind(host, port)
    except OSError as err:
        service.operator.store.close()
        raise SaihmError(f"cannot listen on {host}:{port}: {err.strerror}") from err
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    url = f"{'https' if tls else 'http'}://{shown}:{bound_port}/"
    credential_file = Path(service.authority.directory) / CREDENTIAL_FILE
    print(
        f"saihm: authority service {url} (keys in {service.authority.directory})\n"
        f"saihm: admin credential {'created in' if created else 'in'} {credential_file} "
        "(mode 0600; send it as 'Authorization: Bearer <credential>', never to an agent)",
        flush=True,
    )
    try:
        asyncio.run(_serve(service, sock, context))
    finally:
        sock.close()
        service.operator.store.close()
    return 0
