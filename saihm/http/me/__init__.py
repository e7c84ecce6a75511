"""``GET /me/``: the person's own page, and the person's calls (docs/authority.md "The person").

Static HTML, CSS and JavaScript shipped in the package, served beside the explorer with the
same strict CSP; the page imports the explorer's Merkle, signed-note and DOM modules
(``/explorer/merkle.js`` ...) rather than copying them.

The person signs in with a passkey (:mod:`saihm.authority.person`): a one-time link from the
authority enrols one, later visits sign in with it, and either ceremony answers a person token
the page keeps in a variable (never a URL, cookie or Web Storage) and sends only as
``Authorization: Bearer`` to ``/me/v1/...``. Every ``/me/v1`` call that reads or acts takes a
person token and nothing else: a capability (a session token, a holder-wide grant, a consumer
grant, narrowed or not) is 403 ``not_permitted``, whatever the operator's flags, because a
token does not say whether a person or an agent holds it. A request whose ``Origin`` names
another origin than the one the person signed in on is 403 ``bad_origin``.

The ceremonies (no credential; the link's code or the passkey is the proof):

- ``POST /me/v1/enrol/options`` ``{"link"}`` and ``POST /me/v1/enrol`` ``{"ceremonyId",
  "credential"}``: ``navigator.credentials.create`` from a one-time link;
- ``POST /me/v1/signin/options`` ``{}`` and ``POST /me/v1/signin`` ``{"ceremonyId",
  "credential"}``: ``navigator.credentials.get``.

The person's calls (each action runs the operator's own path, so it is a receipt in the log as
from the command line):

- ``POST /me/v1/call`` ``{"method", "params"}``: the tools the page needs, for every session of
  the holder: ``saihm_status``, ``saihm_recall``, ``saihm_remember`` (add; with
  ``supersedes``: edit), ``saihm_forget``, ``saihm_revoke_share``,
  ``saihm_accept_contract``, ``saihm_decline_contract``; a new memory goes into the person's
  own session (:func:`person_session`);
- ``GET /me/v1/history?cellId=``: the cells the person's own edits replaced with this one
  (ids and times; the public log does not say which cell a REMEMBER superseded);
- ``GET /me/v1/grants``: the local vault's consumer grants of this holder, the labels the
  person gave grants, and what each grant read (when, how many cells: kept by the operator,
  sealed, never in the public log); ``POST /me/v1/grants/name`` ``{"grantId", "name"}``;
- ``POST /me/v1/grants/revoke`` ``{"grantId"}``: UNGRANT (a vault consumer's grant also
  rejects its pending proposals, as ``saihm memory revoke``);
- ``GET /me/v1/pending``; ``POST /me/v1/pending/accept`` | ``/reject`` ``{"id"}``;
- ``GET /me/v1/export``: the person's memory as one file (``application/cbor``, an audit bundle
  with the ``person`` member, docs/formats.md §5.1) that ``saihm verify FILE`` checks offline;
- ``GET /me/v1/passkeys``; ``POST /me/v1/passkeys/remove`` ``{"passkeyId"}`` (its sign-ins
  end with it); ``POST /me/v1/signout``.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from aiohttp import web

from saihm.authority.person import PERSON_TOKEN_PREFIX, PersonSession, PersonState
from saihm.errors import ErrorCode, MalformedInput, NotFound, NotPermitted
from saihm.http.common import (
    OPERATOR,
    PERSON_STATE,
    Handler,
    bearer_token,
    json_response,
    run_sync,
)
from saihm.http.explorer import CSP
from saihm.http.toolcall import CUT_HEADER, NEXT_HEADER, read_bounded

if TYPE_CHECKING:
    from saihm.operator import Operator
    from saihm.provider.vault import LocalVault
    from saihm.store import Access

__all__ = ["FILES", "PERSON_METHODS", "add_me_routes", "person_session"]

#: Every file the page is made of, with its media type; nothing else is served from here.
FILES = {
    "index.html": "text/html",
    "me.css": "text/css",
    "me.js": "text/javascript",
}
#: The tools ``/me/v1/call`` runs for the person.
PERSON_METHODS = frozenset(
    {
        "saihm_status",
        "saihm_recall",
        "saihm_remember",
        "saihm_forget",
        "saihm_revoke_share",
        "saihm_accept_contract",
        "saihm_decline_contract",
    }
)
_HEX64 = frozenset("0123456789abcdef")


def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def _headers() -> dict[str, str]:
    return {
        "Cache-Control": "no-store",
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }


async def index(request: web.Request) -> web.Response:
    """``GET /me/``: the page (no token in it)."""
    return web.Response(
        body=_read("index.html"), content_type="text/html", charset="utf-8", headers=_headers()
    )


async def static_file(request: web.Request) -> web.Response:
    """``GET /me/<file>``: one of :data:`FILES`; any other name is 404 ``not_found``."""
    name = request.match_info["name"]
    if name not in FILES or name == "index.html":
        raise web.HTTPNotFound()
    return web.Response(
        body=_read(name), content_type=FILES[name], charset="utf-8", headers=_headers()
    )


async def redirect(request: web.Request) -> web.Response:
    """``GET /me``: to ``/me/``, so the page's relative links resolve."""
    raise web.HTTPMovedPermanently("/me/")


# -- who is asking -------------------------------------------------------------------------


def person_session(holder_id: bytes) -> bytes:
    """The session a person's own new memories go into (one per holder, named, not secret)."""
    return hashlib.sha256(b"saihm-person-session-v1" + holder_id).digest()


def check_person(
    operator: Operator, state: PersonState, token: str, origin: str | None
) -> PersonSession:
    """The person's checked session; an agent's token (any capability) is 403
    ``not_permitted``, a bad or ended person token 401, another origin 403 ``bad_origin``."""
    if not token.startswith(PERSON_TOKEN_PREFIX):
        operator.store.authenticate(token)  # a token that is no valid capability: 401
        raise NotPermitted(
            "an agent's token never acts for the person: sign in with your passkey at /me/"
        )
    session = state.session(token)
    if origin is not None and origin != session.origin:
        raise NotPermitted("this request comes from another origin", code=ErrorCode.BAD_ORIGIN)
    return session


def _access(operator: Operator, session: PersonSession) -> Access:
    ttl = max(1, session.expires_at - int(operator.store.clock()))
    return operator.store.person_access(
        session.holder_id, person_session(session.holder_id), ttl, all_sessions=True
    )


def _vault(operator: Operator, holder_id: bytes) -> LocalVault | None:
    """The local vault when it belongs to ``holder_id``, else None."""
    from saihm.provider.vault import LocalVault

    try:
        vault = LocalVault.open(operator)
    except NotFound:
        return None
    return vault if vault.meta.holder_id == holder_id else None


def _hex_id(value: object, name: str, code: str) -> str:
    if not isinstance(value, str) or len(value) != 64 or not set(value) <= _HEX64:
        raise MalformedInput(f"{name} must be 64 lowercase hexadecimal characters", code=code)
    return value


async def _json_body(request: web.Request, fields: set[str], required: set[str]) -> dict[str, Any]:
    raw = await read_bounded(request)
    try:
        body = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise MalformedInput("the body is not a JSON object") from err
    if not isinstance(body, dict) or not required <= set(body) <= fields:
        raise MalformedInput(f"the body has the fields {sorted(fields)}")
    return body


# -- the person's calls ----------------------------------------------------------------------


def list_grants(operator: Operator, holder_id: bytes, state: PersonState) -> dict[str, Any]:
    """The vault's consumer grants of the holder, and the holder's grant labels."""
    vault = _vault(operator, holder_id)
    consumers = (
        []
        if vault is None
        else [
            {
                "consumer": name,
                "grantId": entry.get("grantId"),
                "mode": entry.get("mode"),
                "namespaces": list(entry.get("namespaces") or []),
                "expiresAt": None if entry.get("expiresAt") is None else str(entry["expiresAt"]),
            }
            for name, entry in sorted(vault.meta.consumers.items())
        ]
    )
    return {
        "grants": consumers,
        "names": state.grant_names(holder_id),
        "uses": state.grant_uses(holder_id),
    }


def _holders_grant(operator: Operator, holder_id: bytes, grant_hex: str) -> bytes:
    grant_id = bytes.fromhex(grant_hex)
    record = operator.store.grant(grant_id)
    if record is None or record.holder != holder_id:
        raise NotFound("no such grant", code=ErrorCode.GRANT_NOT_FOUND)
    return grant_id


def revoke_grant(operator: Operator, holder_id: bytes, grant_hex: str) -> dict[str, Any]:
    """Withdraw one of the holder's grants; another holder's is ``grant_not_found``."""
    grant_id = _holders_grant(operator, holder_id, grant_hex)
    vault = _vault(operator, holder_id)
    if vault is not None:
        for consumer, entry in list(vault.meta.consumers.items()):
            if entry.get("grantId") == grant_hex:
                done = vault.revoke(consumer)
                return {"grantId": grant_hex, "revoked": True, "changed": done["changed"]}
    changed = operator.admin.ungrant(grant_id)
    return {"grantId": grant_hex, "revoked": True, "changed": changed}


def list_pending(operator: Operator, holder_id: bytes) -> list[dict[str, Any]]:
    """The vault's held proposals, decrypted for the person; ``[]`` for another holder."""
    vault = _vault(operator, holder_id)
    if vault is None:
        return []
    return [p.model_dump(mode="json") for p in vault.pending(show=True)]


def decide(operator: Operator, holder_id: bytes, proposal_id: str, accept: bool) -> dict[str, Any]:
    """Accept (REMEMBER) or reject a held proposal; one not held is ``proposal_not_found``."""
    vault = _vault(operator, holder_id)
    if vault is None:
        raise NotFound("no such pending proposal", code=ErrorCode.PROPOSAL_NOT_FOUND)
    if accept:
        return {"accepted": True, "record": vault.accept(proposal_id).model_dump(mode="json")}
    if not vault.reject(proposal_id):
        raise NotFound("no such pending proposal", code=ErrorCode.PROPOSAL_NOT_FOUND)
    return {"rejected": True, "id": proposal_id}


def person_call(
    operator: Operator,
    state: PersonState,
    session: PersonSession,
    method: str,
    params: object,
) -> Any:
    """One of :data:`PERSON_METHODS` for the person (every session of the holder); an edit
    (``saihm_remember`` with ``supersedes``) is noted for the page's history."""
    from saihm.protocol.binding import BINDINGS, recall_items

    if method not in PERSON_METHODS:
        raise NotFound("not a call of the person's page", code=ErrorCode.UNKNOWN_METHOD)
    row = BINDINGS[method]
    access = _access(operator, session)
    args = row.parse(params if params is not None else {}, operator.config)  # type: ignore[arg-type]
    result = row.invoke(operator, access, args)
    if method == "saihm_remember" and args[2] is not None:
        state.record_edit(session.holder_id, result.cell_id, args[2], int(result.epoch))
    return row.render(result, recall_items(operator))


# -- handlers --------------------------------------------------------------------------------


def _who(request: web.Request) -> tuple[Operator, PersonState, str, str | None]:
    return (
        request.app[OPERATOR],
        request.app[PERSON_STATE],
        bearer_token(request),
        request.headers.get("Origin"),
    )


async def _person(request: web.Request) -> PersonSession:
    operator, state, token, origin = _who(request)
    return await run_sync(request, check_person, operator, state, token, origin)


async def post_call(request: web.Request) -> web.Response:
    from saihm.protocol import RecallAnswer

    session = await _person(request)
    body = await _json_body(request, {"method", "params"}, {"method"})
    if not isinstance(body["method"], str):
        raise MalformedInput("method must be a string")
    result = await run_sync(
        request,
        person_call,
        request.app[OPERATOR],
        request.app[PERSON_STATE],
        session,
        body["method"],
        body.get("params"),
    )
    response = json_response(result)
    if isinstance(result, RecallAnswer):
        response.headers[CUT_HEADER] = "true" if result.cut else "false"
        if result.next_cursor is not None:
            response.headers[NEXT_HEADER] = result.next_cursor
    return response


async def get_history(request: web.Request) -> web.Response:
    """``GET /me/v1/history?cellId=``: the cells the person's edits replaced with this one."""
    session = await _person(request)
    cell_hex = _hex_id(request.query.get("cellId"), "cellId", ErrorCode.NOT_FOUND)
    state = request.app[PERSON_STATE]
    replaced = await run_sync(request, state.replaced, session.holder_id, bytes.fromhex(cell_hex))
    return json_response({"cellId": cell_hex, "replaced": replaced})


async def get_grants(request: web.Request) -> web.Response:
    session = await _person(request)
    state = request.app[PERSON_STATE]
    answer = await run_sync(request, list_grants, request.app[OPERATOR], session.holder_id, state)
    return json_response(answer)


async def post_name(request: web.Request) -> web.Response:
    session = await _person(request)
    body = await _json_body(request, {"grantId", "name"}, {"grantId", "name"})
    grant_hex = _hex_id(body["grantId"], "grantId", ErrorCode.GRANT_NOT_FOUND)
    if not isinstance(body["name"], str):
        raise MalformedInput("name must be a string")
    operator, state = request.app[OPERATOR], request.app[PERSON_STATE]

    def name() -> dict[str, Any]:
        grant_id = _holders_grant(operator, session.holder_id, grant_hex)
        state.name_grant(session.holder_id, grant_id, body["name"])
        return {"grantId": grant_hex, "name": body["name"].strip()}

    return json_response(await run_sync(request, name))


async def post_revoke(request: web.Request) -> web.Response:
    session = await _person(request)
    body = await _json_body(request, {"grantId"}, {"grantId"})
    grant_hex = _hex_id(body["grantId"], "grantId", ErrorCode.GRANT_NOT_FOUND)
    return json_response(
        await run_sync(request, revoke_grant, request.app[OPERATOR], session.holder_id, grant_hex)
    )


async def get_pending(request: web.Request) -> web.Response:
    session = await _person(request)
    pending = await run_sync(request, list_pending, request.app[OPERATOR], session.holder_id)
    return json_response({"pending": pending})


def _decision(accept: bool) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        session = await _person(request)
        body = await _json_body(request, {"id"}, {"id"})
        proposal_id = _hex_id(body["id"], "id", ErrorCode.PROPOSAL_NOT_FOUND)
        answer = await run_sync(
            request, decide, request.app[OPERATOR], session.holder_id, proposal_id, accept
        )
        return json_response(answer)

    return handle


async def get_export(request: web.Request) -> web.Response:
    """``GET /me/v1/export``: the person's export file, as an attachment (never cached)."""
    from saihm.http.me.export import person_export

    session = await _person(request)
    operator = request.app[OPERATOR]
    access = await run_sync(request, _access, operator, session)
    body = await run_sync(request, person_export, operator, access)
    return web.Response(
        body=body,
        content_type="application/cbor",
        headers={
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Content-Disposition": 'attachment; filename="saihm-memory.saihm"',
        },
    )


async def get_passkeys(request: web.Request) -> web.Response:
    session = await _person(request)
    state = request.app[PERSON_STATE]
    keys = await run_sync(request, state.passkeys, session.holder_id)
    return json_response(
        {
            "passkeys": [
                {**k.to_json(), "current": k.passkey_id == session.passkey_id.hex()} for k in keys
            ]
        }
    )


async def post_remove_passkey(request: web.Request) -> web.Response:
    session = await _person(request)
    body = await _json_body(request, {"passkeyId"}, {"passkeyId"})
    passkey = _hex_id(body["passkeyId"], "passkeyId", ErrorCode.NOT_FOUND)
    state = request.app[PERSON_STATE]
    await run_sync(request, state.remove_passkey, session.holder_id, passkey)
    return json_response({"passkeyId": passkey, "removed": True})


async def post_signout(request: web.Request) -> web.Response:
    await _person(request)
    state = request.app[PERSON_STATE]
    await run_sync(request, state.sign_out, bearer_token(request))
    return json_response({"signedOut": True})


async def post_enrol_options(request: web.Request) -> web.Response:
    body = await _json_body(request, {"link"}, {"link"})
    state = request.app[PERSON_STATE]
    origin = request.headers.get("Origin")
    return json_response(await run_sync(request, state.registration_options, body["link"], origin))


async def post_enrol(request: web.Request) -> web.Response:
    body = await _json_body(request, {"ceremonyId", "credential"}, {"ceremonyId", "credential"})
    state = request.app[PERSON_STATE]
    return json_response(
        await run_sync(request, state.register, body["ceremonyId"], body["credential"])
    )


async def post_signin_options(request: web.Request) -> web.Response:
    await _json_body(request, set(), set())
    state = request.app[PERSON_STATE]
    origin = request.headers.get("Origin")
    return json_response(await run_sync(request, state.authentication_options, origin))


async def post_signin(request: web.Request) -> web.Response:
    body = await _json_body(request, {"ceremonyId", "credential"}, {"ceremonyId", "credential"})
    state = request.app[PERSON_STATE]
    return json_response(
        await run_sync(request, state.authenticate, body["ceremonyId"], body["credential"])
    )


def add_me_routes(app: web.Application) -> None:
    """Register ``/me``, ``/me/``, the page's static files, the ceremonies and the person's
    calls (``app[OPERATOR]`` must be set)."""
    app[PERSON_STATE] = PersonState(app[OPERATOR].store)
    app.router.add_get("/me", redirect)
    app.router.add_get("/me/", index)
    app.router.add_post("/me/v1/enrol/options", post_enrol_options)
    app.router.add_post("/me/v1/enrol", post_enrol)
    app.router.add_post("/me/v1/signin/options", post_signin_options)
    app.router.add_post("/me/v1/signin", post_signin)
    app.router.add_post("/me/v1/signout", post_signout)
    app.router.add_post("/me/v1/call", post_call)
    app.router.add_get("/me/v1/history", get_history)
    app.router.add_get("/me/v1/export", get_export)
    app.router.add_get("/me/v1/passkeys", get_passkeys)
    app.router.add_post("/me/v1/passkeys/remove", post_remove_passkey)
    app.router.add_get("/me/v1/grants", get_grants)
    app.router.add_post("/me/v1/grants/name", post_name)
    app.router.add_post("/me/v1/grants/revoke", post_revoke)
    app.router.add_get("/me/v1/pending", get_pending)
    app.router.add_post("/me/v1/pending/accept", _decision(True))
    app.router.add_post("/me/v1/pending/reject", _decision(False))
    app.router.add_get("/me/{name}", static_file)
