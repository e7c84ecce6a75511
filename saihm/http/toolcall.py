"""``POST /``: the HTTP transport of the protocol's binding (saihm-protocol "HTTPS binding").

The body is read within its bound, the bearer token taken from ``Authorization``, and the call
run by :func:`saihm.protocol.call`; the result (or its :class:`SaihmError`, through the app's
error middleware) becomes the response. Parsing and rendering live in :mod:`saihm.protocol`.
"""

from __future__ import annotations

from aiohttp import web

from saihm.errors import MalformedInput, TooLarge
from saihm.http.common import (
    EXECUTOR,
    MAX_BODY,
    OPERATOR,
    PERSON_STATE,
    bearer_token,
    json_response,
    run_sync,
)
from saihm.protocol import RecallAnswer, call, parse_call

__all__ = ["CUT_HEADER", "NEXT_HEADER", "handle", "read_bounded"]

#: docs/retrieval.md "Extension params": whether a recall answer was cut, and where to go on.
CUT_HEADER = "Saihm-Recall-Cut"
NEXT_HEADER = "Saihm-Recall-Next"


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


def note_read(request: web.Request, token: str, cells: int) -> None:
    """What a grant read, for the person's page (saihm.authority.person.note_grant_read);
    a store write at most every few seconds per grant, so off the event loop. The binding
    route and the provider's ``/memory/v1`` reads both note through it."""
    from saihm.authority.person import note_grant_read

    write = note_grant_read(request.app.get(PERSON_STATE), token, cells)
    if write is not None:
        request.app[EXECUTOR].submit(write)


async def handle(request: web.Request) -> web.Response:
    """``POST /``: one tool call; the result object (an array for recall) or ``{"error"}``.

    saihm-protocol "Request and response": no outer envelope; 2xx on success, 4xx/5xx with the
    tool's error code on failure; an unknown method or a disabled tool answers a failure status.
    """
    token = bearer_token(request)
    body = await read_bounded(request)
    method, params = parse_call(body)
    result = await run_sync(request, call, request.app[OPERATOR], token, method, params)
    response = json_response(result)
    if isinstance(result, RecallAnswer):
        note_read(request, token, len(result))
        response.headers[CUT_HEADER] = "true" if result.cut else "false"
        if result.next_cursor is not None:
            response.headers[NEXT_HEADER] = result.next_cursor
    return response
