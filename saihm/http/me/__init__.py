"""``GET /me/``: the person's own page (DESIGN.md "Pinned additions for the third round").

Static HTML, CSS and JavaScript shipped in the package, served beside the explorer with the
same strict CSP; the page imports the explorer's Merkle, signed-note and DOM modules
(``/explorer/merkle.js`` ...) rather than copying them. The person pastes a token they hold;
the script keeps it in a variable of the page (never a URL, cookie or Web Storage) and sends it
only as ``Authorization: Bearer`` on ordinary capability-checked calls: ``POST /`` (the
``saihm_*`` tools), the public ``/log/...`` API, and the few person's actions below that no tool
offers.

The person's actions (``/me/v1/...``) take a holder-wide token that is not a consumer grant
(``saihm grant --sessions all``): a session token may read and forget its own session's cells
through the tools but may not withdraw grants or decide proposals. The two POST actions are
taken only when the operator serves ``--person-actions`` (default off): an agent that recalls
across sessions holds the same kind of grant, and a token does not say who holds it. Each
action runs the same operator path as the command line, so it is logged the same way:

- ``GET  /me/v1/grants``: the local vault's consumer grants of this holder (who, mode,
  namespaces, until when); ``[]`` without a vault or for another holder.
- ``POST /me/v1/grants/revoke`` ``{"grantId"}``: withdraw one of this holder's grants (UNGRANT;
  a vault consumer's grant also rejects its pending proposals, as ``saihm memory revoke``).
- ``GET  /me/v1/pending``: the vault's held write proposals, decrypted for the person.
- ``POST /me/v1/pending/accept`` | ``/me/v1/pending/reject`` ``{"id"}``: commit (REMEMBER) or
  drop a held proposal (``saihm memory accept|reject``).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from aiohttp import web

from saihm.errors import ErrorCode, MalformedInput, NotFound, NotPermitted
from saihm.http.common import OPERATOR, Handler, bearer_token, json_response, run_sync
from saihm.http.explorer import CSP
from saihm.http.toolcall import read_bounded

if TYPE_CHECKING:
    from saihm.operator import Operator
    from saihm.provider.vault import LocalVault
    from saihm.store import Access

__all__ = ["FILES", "add_me_routes"]

#: Every file the page is made of, with its media type; nothing else is served from here.
FILES = {
    "index.html": "text/html",
    "me.css": "text/css",
    "me.js": "text/javascript",
}
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
    """``GET /me/``: the page (no token in it; the person pastes one)."""
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


# -- the person's actions ------------------------------------------------------------------


def _person(operator: Operator, token: str) -> Access:
    """The checked Access of a holder-wide, non-consumer token; 401 for a bad token, 403
    ``not_permitted`` for a session token or a consumer grant."""
    access = operator.store.authenticate(token)
    if access.consumer is not None or not access.all_sessions:
        raise NotPermitted("this action needs a holder-wide grant (saihm grant --sessions all)")
    return access


def _vault(operator: Operator, holder_id: bytes) -> LocalVault | None:
    """The local vault when it belongs to ``holder_id``, else None."""
    from saihm.provider.vault import LocalVault

    try:
        vault = LocalVault.open(operator)
    except NotFound:
        return None
    return vault if vault.meta.holder_id == holder_id else None


def _id(body: dict[str, Any], name: str, code: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or len(value) != 64 or not set(value) <= _HEX64:
        raise MalformedInput(f"{name} must be 64 lowercase hexadecimal characters", code=code)
    return value


async def _body(request: web.Request, name: str, code: str) -> str:
    raw = await read_bounded(request)
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise MalformedInput("the body is not a JSON object") from err
    if not isinstance(body, dict) or set(body) != {name}:
        raise MalformedInput(f"the body is {{{name!r}: ...}}")
    return _id(body, name, code)


def list_grants(operator: Operator, token: str) -> list[dict[str, Any]]:
    """The vault's consumer grants of the token's holder, by consumer name."""
    access = _person(operator, token)
    vault = _vault(operator, access.holder_id)
    if vault is None:
        return []
    return [
        {
            "consumer": name,
            "grantId": entry.get("grantId"),
            "mode": entry.get("mode"),
            "namespaces": list(entry.get("namespaces") or []),
            "expiresAt": None if entry.get("expiresAt") is None else str(entry["expiresAt"]),
        }
        for name, entry in sorted(vault.meta.consumers.items())
    ]


def _acting_person(operator: Operator, token: str) -> Access:
    """:func:`_person`, for an action that changes what others may do: refused (403
    ``not_permitted``) unless the operator serves ``--person-actions``. A holder-wide grant is
    also what an agent that recalls across sessions holds, and a token does not say whether
    a person or an agent holds it, so the operator opts in (docs/operations.md)."""
    access = _person(operator, token)
    if not operator.config.person_actions:
        raise NotPermitted(
            "this operator does not take these actions from the page (saihm serve "
            "--person-actions); the person runs saihm memory revoke/accept/reject instead"
        )
    return access


def revoke_grant(operator: Operator, token: str, grant_hex: str) -> dict[str, Any]:
    """Withdraw one of the token holder's grants; another holder's is ``grant_not_found``."""
    access = _acting_person(operator, token)
    grant_id = bytes.fromhex(grant_hex)
    with operator.store.read_txn() as txn:
        record = operator.store.projections.grants.get(txn, grant_id)
    if record is None or record.holder != access.holder_id:
        raise NotFound("no such grant", code=ErrorCode.GRANT_NOT_FOUND)
    vault = _vault(operator, access.holder_id)
    if vault is not None:
        for consumer, entry in list(vault.meta.consumers.items()):
            if entry.get("grantId") == grant_hex:
                done = vault.revoke(consumer)
                return {"grantId": grant_hex, "revoked": True, "changed": done["changed"]}
    changed = operator.admin.ungrant(grant_id)
    return {"grantId": grant_hex, "revoked": True, "changed": changed}


def list_pending(operator: Operator, token: str) -> list[dict[str, Any]]:
    """The vault's held proposals, decrypted for the person; ``[]`` for another holder."""
    access = _person(operator, token)
    vault = _vault(operator, access.holder_id)
    if vault is None:
        return []
    return [p.model_dump(mode="json") for p in vault.pending(show=True)]


def decide(operator: Operator, token: str, proposal_id: str, accept: bool) -> dict[str, Any]:
    """Accept (REMEMBER) or reject a held proposal; one not held is ``proposal_not_found``."""
    access = _acting_person(operator, token)
    vault = _vault(operator, access.holder_id)
    if vault is None:
        raise NotFound("no such pending proposal", code=ErrorCode.PROPOSAL_NOT_FOUND)
    if accept:
        return {"accepted": True, "record": vault.accept(proposal_id).model_dump(mode="json")}
    if not vault.reject(proposal_id):
        raise NotFound("no such pending proposal", code=ErrorCode.PROPOSAL_NOT_FOUND)
    return {"rejected": True, "id": proposal_id}


async def get_grants(request: web.Request) -> web.Response:
    token = bearer_token(request)
    grants = await run_sync(request, list_grants, request.app[OPERATOR], token)
    return json_response({"grants": grants})


async def post_revoke(request: web.Request) -> web.Response:
    token = bearer_token(request)
    grant_id = await _body(request, "grantId", ErrorCode.GRANT_NOT_FOUND)
    return json_response(
        await run_sync(request, revoke_grant, request.app[OPERATOR], token, grant_id)
    )


async def get_pending(request: web.Request) -> web.Response:
    token = bearer_token(request)
    pending = await run_sync(request, list_pending, request.app[OPERATOR], token)
    return json_response({"pending": pending})


def _decision(accept: bool) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        token = bearer_token(request)
        proposal_id = await _body(request, "id", ErrorCode.PROPOSAL_NOT_FOUND)
        answer = await run_sync(request, decide, request.app[OPERATOR], token, proposal_id, accept)
        return json_response(answer)

    return handle


def add_me_routes(app: web.Application) -> None:
    """Register ``/me``, ``/me/``, the page's static files and the person's actions."""
    app.router.add_get("/me", redirect)
    app.router.add_get("/me/", index)
    app.router.add_get("/me/v1/grants", get_grants)
    app.router.add_post("/me/v1/grants/revoke", post_revoke)
    app.router.add_get("/me/v1/pending", get_pending)
    app.router.add_post("/me/v1/pending/accept", _decision(True))
    app.router.add_post("/me/v1/pending/reject", _decision(False))
    app.router.add_get("/me/{name}", static_file)
