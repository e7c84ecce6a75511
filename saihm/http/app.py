"""The aiohttp application: the protocol binding, the public log API and the governance page.

``create_app(operator)`` is the only constructor (DESIGN.md "HTTP"); nothing happens at import
time. Every response body is JSON (or a signed note, a tile, an HTML page); every failure is
``{"error": code}`` with the status of the :class:`SaihmError` class that raised it, and no
response carries a traceback, a key, a token or plaintext the caller may not see.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from saihm.errors import MalformedInput, SaihmError, TooLarge, Unauthenticated
from saihm.recallwindow import CUT_HEADER, NEXT_HEADER, RecallAnswer

if TYPE_CHECKING:
    from saihm.operator import Operator

__all__ = ["EXECUTOR", "OPERATOR", "create_app", "json_response", "run_sync"]

OPERATOR: web.AppKey[Operator] = web.AppKey("saihm.operator")
EXECUTOR: web.AppKey[ThreadPoolExecutor] = web.AppKey("saihm.executor")
MAX_BODY: web.AppKey[int] = web.AppKey("saihm.max_body", int)

#: Threads that run Operator calls. Several at once let the store's group commit put their
#: receipts into one write transaction; ML-DSA signing and LMDB release the GIL.
THREADS = 32
#: Longest path written to the access log, so a hostile path cannot flood it.
LOG_PATH_MAX = 200

access_log = logging.getLogger("saihm.http.access")
error_log = logging.getLogger("saihm.http")

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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


# -- middlewares -----------------------------------------------------------------------------

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "not_permitted",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
}


@web.middleware
async def access_log_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """One JSON line per request: method, path (no query string), status, duration in ms and
    the serving process id (which worker answered).

    Never the Authorization header, the query text or any body.
    """
    started = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    finally:
        access_log.info(
            json.dumps(
                {
                    "method": request.method[:16],
                    "path": request.rel_url.path[:LOG_PATH_MAX],
                    "status": status,
                    "ms": round((time.perf_counter() - started) * 1000, 3),
                    "pid": os.getpid(),
                }
            )
        )


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure into ``{"error": code}``; an unexpected one into 500 "internal".

    An unexpected exception is logged by its type only: its message or traceback could hold
    plaintext or a token.
    """
    try:
        return await handler(request)
    except SaihmError as err:
        return error_response(err.status, err.code)
    except web.HTTPException as err:
        if err.status < 400:
            raise
        return error_response(err.status, _HTTP_CODES.get(err.status, "bad_request"))
    except asyncio.CancelledError:
        raise
    except Exception as err:
        error_log.error("internal error: %s", type(err).__name__)
        return error_response(500, "internal")


# -- POST / : the protocol binding -------------------------------------------------------------


def bearer_token(request: web.Request) -> str:
    """The capability token of ``Authorization: Bearer <token>`` (saihm-protocol
    "Authentication"); a missing or malformed header is :class:`Unauthenticated`."""
    header = request.headers.get("Authorization")
    if header is None:
        raise Unauthenticated("no Authorization header")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or any(c.isspace() for c in token):
        raise Unauthenticated("Authorization must be 'Bearer <token>'")
    return token


def _reject_constant(name: str) -> object:
    raise MalformedInput("NaN and Infinity are not JSON")


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise MalformedInput("duplicate member in a JSON object")
    return out


def parse_call(body: bytes) -> tuple[str, dict]:
    """Parse ``{"method": string, "params": object}`` (params may be absent).

    Raises :class:`MalformedInput` ("bad_request") for anything else: bytes that are not
    UTF-8 JSON, a non-object body, a missing or non-string method, non-object params,
    duplicate members or members other than these two.
    """
    try:
        call = json.loads(
            body.decode("utf-8"),
            parse_constant=_reject_constant,
            object_pairs_hook=_unique_members,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise MalformedInput("the body is not a JSON object") from err
    if not isinstance(call, dict):
        raise MalformedInput("the body must be a JSON object")
    if set(call) - {"method", "params"}:
        raise MalformedInput("the body holds members other than method and params")
    method = call.get("method")
    params = call.get("params", {})
    if not isinstance(method, str):
        raise MalformedInput("method must be a string")
    if not isinstance(params, dict):
        raise MalformedInput("params must be a JSON object")
    return method, params


async def read_bounded(request: web.Request) -> bytes:
    """The request body, refusing (413 "too_large") one over ``client_max_size``.

    A declared Content-Length over the bound is refused before any of the body is read; a
    chunked body is read only up to the bound (aiohttp stops at ``client_max_size``).
    """
    limit = request.app[MAX_BODY]
    if request.content_length is not None and request.content_length > limit:
        raise TooLarge("request body too large")
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as err:
        raise TooLarge("request body too large") from err
    except web.RequestPayloadError as err:
        # A body whose framing breaks after the handler started (a bad chunk, a short body):
        # the client's fault, and the message (which quotes the bytes) is not kept.
        raise MalformedInput("the request body is malformed") from err


async def binding(request: web.Request) -> web.Response:
    """``POST /``: one tool call; the result object (an array for recall) or ``{"error"}``.

    saihm-protocol "Request and response": no outer envelope; 2xx on success, 4xx/5xx with the
    tool's error code on failure; an unknown method or a disabled tool answers a failure status.
    """
    token = bearer_token(request)
    body = await read_bounded(request)
    method, params = parse_call(body)
    operator = request.app[OPERATOR]
    result = await run_sync(request, operator.call, token, method, params)
    response = json_response(result)
    if isinstance(result, RecallAnswer):
        # docs/retrieval.md "Extension params": whether the answer was cut, and where to go on.
        response.headers[CUT_HEADER] = "true" if result.cut else "false"
        if result.next_cursor is not None:
            response.headers[NEXT_HEADER] = result.next_cursor
    return response


# -- the factory -----------------------------------------------------------------------------


def create_app(operator: Operator, *, client_max_size: int = 1 << 20) -> web.Application:
    """The application over ``operator``; the caller owns the operator and closes its store.

    ``client_max_size`` bounds every request body (413 "too_large" above it).
    """
    from saihm.http.explorer import add_explorer_routes
    from saihm.http.governance import governance
    from saihm.http.limits import TokenBuckets, rate_limit_middleware
    from saihm.http.log_api import add_log_routes
    from saihm.http.ops import add_ops_routes, metrics_middleware
    from saihm.provider.http import add_routes as add_memory_routes
    from saihm.provider.vault import LocalVault

    if client_max_size < 1:
        raise ValueError("client_max_size must be positive")
    config = operator.config
    limiter = rate_limit_middleware(
        TokenBuckets(config.rate_limit, config.rate_burst), operator.store.authority_public_key
    )
    app = web.Application(
        client_max_size=client_max_size,
        middlewares=[access_log_middleware, metrics_middleware, limiter, error_middleware],
    )
    app[OPERATOR] = operator
    app[MAX_BODY] = client_max_size

    async def executor_ctx(app: web.Application) -> AsyncIterator[None]:
        app[EXECUTOR] = ThreadPoolExecutor(THREADS, thread_name_prefix="saihm-call")
        yield
        app[EXECUTOR].shutdown(wait=True)

    app.cleanup_ctx.append(executor_ctx)
    app.router.add_post("/", binding)
    app.router.add_get("/governance", governance)
    add_explorer_routes(app)
    add_log_routes(app)
    add_ops_routes(app, operator.store)
    add_memory_routes(app, lambda: LocalVault.open(operator))
    return app
