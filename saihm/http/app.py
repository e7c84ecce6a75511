"""The aiohttp application: the middlewares and the routes of every part (the protocol binding
:mod:`saihm.http.toolcall` over :mod:`saihm.protocol`, the public log API, the governance page,
the explorer, ops).

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
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from aiohttp import web

from saihm.errors import SaihmError
from saihm.http.common import (
    EXECUTOR,
    MAX_BODY,
    OPERATOR,
    Handler,
    answered,
    bearer_token,
    error_response,
    json_response,
    run_sync,
)

if TYPE_CHECKING:
    from saihm.http.log_api import Submitter
    from saihm.operator import Operator

__all__ = [
    "EXECUTOR",
    "OPERATOR",
    "bearer_token",
    "create_app",
    "error_response",
    "json_response",
    "run_sync",
]

#: Threads that run Operator calls. Several at once let the store's group commit put their
#: receipts into one write transaction; ML-DSA signing and LMDB release the GIL.
THREADS = 32
#: Longest path written to the access log, so a hostile path cannot flood it.
LOG_PATH_MAX = 200

access_log = logging.getLogger("saihm.http.access")
error_log = logging.getLogger("saihm.http")


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

    The status is the one the client gets: a returned response's, or that of an
    ``HTTPException`` that aiohttp answers (a redirect, raised past the error middleware);
    499 when the request was cancelled before any answer (the client went away or the server
    stopped);
    500 for an exception aiohttp answers with 500 (docs/operations.md "Access log").
    Never the Authorization header, the query text or any body.
    """

    def write(status: int, seconds: float) -> None:
        line = {
            "method": request.method[:16],
            "path": request.rel_url.path[:LOG_PATH_MAX],
            "status": status,
            "ms": round(seconds * 1000, 3),
            "pid": os.getpid(),
        }
        access_log.info(json.dumps(line))

    return await answered(request, handler, write)


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


# -- the factory -----------------------------------------------------------------------------


def create_app(
    operator: Operator, *, client_max_size: int = 1 << 20, submitter: Submitter | None = None
) -> web.Application:
    """The application over ``operator``; the caller owns the operator and closes its store.

    ``client_max_size`` bounds every request body (413 "too_large" above it). ``submitter``
    submits the operator's checkpoints to its witnesses while the app runs (``saihm serve``
    passes :func:`saihm.witness.submit.for_config`'s; without one nothing is submitted).
    """
    from saihm.http.explorer import add_explorer_routes
    from saihm.http.governance import governance
    from saihm.http.limits import TokenBuckets, rate_limit_middleware
    from saihm.http.log_api import add_log_routes
    from saihm.http.me import add_me_routes
    from saihm.http.ops import add_ops_routes, metrics_middleware
    from saihm.http.toolcall import handle, note_read
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
    app.router.add_post("/", handle)
    app.router.add_get("/governance", governance)
    add_explorer_routes(app)
    add_me_routes(app)
    add_log_routes(app, submitter)
    add_ops_routes(app, operator.store)
    add_memory_routes(app, lambda: LocalVault.open(operator), note_read)
    return app
