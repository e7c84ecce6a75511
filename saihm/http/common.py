"""What every route module of the HTTP app shares: the app keys, JSON responses, the thread pool.

The route modules (:mod:`saihm.http.toolcall`, :mod:`saihm.http.log_api`,
:mod:`saihm.http.governance`, :mod:`saihm.http.explorer`, :mod:`saihm.http.ops`) import these
from here, and :func:`saihm.http.app.create_app` imports the route modules, so no route module
imports the app (no import cycle; DESIGN.md "Layers").
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from saihm.errors import Unauthenticated

if TYPE_CHECKING:
    from saihm.authority.person import PersonState
    from saihm.operator import Operator

__all__ = [
    "EXECUTOR",
    "MAX_BODY",
    "OPERATOR",
    "Handler",
    "bearer_token",
    "error_response",
    "json_response",
    "run_sync",
]

OPERATOR: web.AppKey[Operator] = web.AppKey("saihm.operator")
EXECUTOR: web.AppKey[ThreadPoolExecutor] = web.AppKey("saihm.executor")
MAX_BODY: web.AppKey[int] = web.AppKey("saihm.max_body", int)
#: The person's passkeys, links and sign-ins (set by :func:`saihm.http.me.add_me_routes`); the
#: binding route notes a grant's reads in it for the person's page.
PERSON_STATE: web.AppKey[PersonState] = web.AppKey("saihm.me.person")

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: The status logged for a request cancelled before any answer (nginx's "client closed").
CLIENT_GONE = 499


async def answered(
    request: web.Request, handler: Handler, seen: Callable[[int, float], None]
) -> web.StreamResponse:
    """Run ``handler`` and tell ``seen`` the status the client got and the seconds it took,
    whatever happens; re-raise what the handler raised. The status is a returned response's,
    or that of an ``HTTPException`` that aiohttp answers (a redirect, raised past an error
    middleware); :data:`CLIENT_GONE` when the request was cancelled before any answer (the
    client went away or the server stopped); 500 for any other exception, which aiohttp
    answers with 500. The access logs and the request metrics all count through this."""
    started = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as err:
        status = err.status
        raise
    except asyncio.CancelledError:
        status = CLIENT_GONE
        raise
    finally:
        seen(status, time.perf_counter() - started)


def json_response(body: object, *, status: int = 200, cache: str = "no-store") -> web.Response:
    """A JSON response with an explicit ``Cache-Control``."""
    return web.Response(
        text=json.dumps(body, separators=(",", ":")),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": cache},
    )


def error_response(status: int, code: str) -> web.Response:
    """``{"error": code}``; never cached, so a CDN cannot pin a transient failure."""
    return json_response({"error": code}, status=status, cache="no-store")


async def run_sync(request: web.Request, function: Callable[..., T], *args: Any) -> T:
    """Run a synchronous store or operator call on the app's thread pool."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(request.app[EXECUTOR], function, *args)


def bearer_token(request: web.Request) -> str:
    """The capability token of ``Authorization: Bearer <token>`` (saihm-protocol
    "Authentication"); a missing or malformed header is :class:`Unauthenticated`."""
    header = request.headers.get("Authorization")
    if header is None:
        raise Unauthenticated("no Authorization header")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    # str.split scans in C: a token is several kilobytes, and this runs on every request.
    if scheme.lower() != "bearer" or not token or len(token.split(maxsplit=1)) != 1:
        raise Unauthenticated("Authorization must be 'Bearer <token>'")
    return token
