"""What the server answers, and logs, for a request aiohttp's own HTTP parser refuses.

aiohttp's ``RequestHandler.handle_error`` logs a refused request at ERROR with the parser's
exception, whose message quotes the offending bytes (a whole ``Authorization:`` line for a
stray control byte, the first hundred bytes of an oversize header), and echoes that message in
a text/plain 400. Both can carry a bearer token. :class:`GuardedRequestHandler` answers instead
with ``{"error": "bad_request"}`` (431 for headers over :data:`HEADER_FIELD_MAX` or too many
headers, 400 for bad header bytes, a bad or overlong request line, a bad body framing) and logs
one line naming only the exception's class and the status; :class:`GuardedAppRunner` is the
:class:`aiohttp.web.AppRunner` whose server builds that handler (saihm-protocol "Request and
response": a failure is ``{"error": code}``).

aiohttp's own access log is left off (``access_log=None``); the app's access-log middleware
writes method, path, status and duration, never a header.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import ssl
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from saihm.events.capability import HEADER_FIELD_MAX

__all__ = [
    "HEADER_FIELD_MAX",
    "REQUEST_LINE_MAX",
    "GuardedAppRunner",
    "GuardedRequestHandler",
    "GuardedServer",
    "parser_error_status",
    "serve_until_signalled",
]

#: Longest request line read. It differs from HEADER_FIELD_MAX so that the limit a
#: ``LineTooLong`` names tells an overlong request line (400) from an oversize header (431).
REQUEST_LINE_MAX = HEADER_FIELD_MAX + 2
#: Most header lines in one request (aiohttp's default); more is 431.
HEADERS_MAX = 128

log = logging.getLogger("saihm.http.parser")

_TOO_MANY_HEADERS = "Too many headers received"


def parser_error_status(exc: BaseException | None, field_max: int = HEADER_FIELD_MAX) -> int:
    """431 for a header over ``field_max`` or too many headers, else 400 (a parser refusal).

    ``LineTooLong`` carries the limit it broke as its second argument: the header limit means a
    header line, any other limit the request line.
    """
    if isinstance(exc, LineTooLong):
        return 431 if len(exc.args) > 1 and exc.args[1] == field_max else 400
    if isinstance(exc, HttpProcessingError) and exc.message.startswith(_TOO_MANY_HEADERS):
        return 431
    return 400


def _json_error(status: int, code: str) -> web.Response:
    response = web.Response(
        text=json.dumps({"error": code}, separators=(",", ":")),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )
    response.force_close()
    return response


class GuardedRequestHandler(RequestHandler):
    """aiohttp's connection handler with failures that never echo or log a header value."""

    __slots__ = ()

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """``{"error": "bad_request"}`` with 400/431 for a parser refusal, ``{"error":
        "internal"}`` with 500 otherwise; the log line holds the exception's class only.

        Like aiohttp's, it closes the connection, and raises ``ConnectionError`` when part of a
        response has already been sent.
        """
        if status < 500:
            status = parser_error_status(exc, self.max_field_size)
            code = "bad_request"
            log.warning(
                "refused a request the HTTP parser could not read: %s (%d)",
                type(exc).__name__ if exc is not None else "unknown",
                status,
            )
        else:
            code = "internal"
            log.error("internal error: %s", type(exc).__name__ if exc is not None else "unknown")
        if request.writer.output_size > 0:
            raise ConnectionError("response already started")
        return _json_error(status, code)

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """Log aiohttp's own failures by the exception's class, never its text or traceback."""
        exc = kw.get("exc_info")
        name = type(exc).__name__ if isinstance(exc, BaseException) else "unknown"
        what = args[0] if args and isinstance(args[0], str) and "%" not in args[0] else "error"
        self.logger.error("%s: %s", what, name)


class GuardedServer(web.Server):
    """An :class:`aiohttp.web.Server` whose connections use :class:`GuardedRequestHandler`."""

    def __call__(self) -> RequestHandler:
        return GuardedRequestHandler(self, loop=self._loop, **self._kwargs)


class GuardedAppRunner(web.AppRunner):
    """``web.AppRunner(app, ...)`` serving with :class:`GuardedServer`, aiohttp's access log
    off and the parser limits :data:`HEADER_FIELD_MAX` / :data:`REQUEST_LINE_MAX`."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        kwargs.setdefault("access_log", None)
        kwargs.setdefault("max_field_size", HEADER_FIELD_MAX)
        kwargs.setdefault("max_line_size", REQUEST_LINE_MAX)
        kwargs.setdefault("max_headers", HEADERS_MAX)
        super().__init__(app, **kwargs)

    async def _make_server(self) -> web.Server:
        # AppRunner starts the app and builds its Server; rebuild that Server as a
        # GuardedServer with the very same handler, request factory and arguments.
        server = await super()._make_server()
        return GuardedServer(
            server.request_handler,
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            loop=server._loop,
            **server._kwargs,
        )


async def serve_until_signalled(
    app: web.Application, sock: socket.socket, ssl_context: ssl.SSLContext | None
) -> None:
    """Serve ``app`` on the bound ``sock`` with a :class:`GuardedAppRunner` until SIGTERM or
    SIGINT, then clean the runner up (the caller owns and closes ``sock``)."""
    runner = GuardedAppRunner(app, handle_signals=False)
    await runner.setup()
    try:
        await web.SockSite(runner, sock, ssl_context=ssl_context).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()
