"""HTTP routes of the local-vault (aiohttp): the consumer side of RFC 0007 over the binding.

``add_routes(app, vault)`` adds, under ``/memory/v1``:

- ``GET  /memory/v1/status`` — ``MemoryProviderStatus``
- ``POST /memory/v1/query``  — body ``MemoryQuery`` → ``MemoryExcerpt``
- ``POST /memory/v1/context`` — body ``MemoryQuery`` → ``{"memory": {"provider", "excerpt"}}``,
  the block a passport's ``export(consumer)`` embeds (RFC "Passport Context assembly")
- ``POST /memory/v1/graph``  — body ``GraphQuery`` → ``GraphExcerpt``
- ``POST /memory/v1/store``  — body ``MemoryStore`` → ``MemoryRecordRef`` (state "pending")

Every route takes the consumer's capability as ``Authorization: Bearer <token>`` and calls the
bound provider, so the store's checks apply exactly as in process. Errors are
``{"error": code}`` with the error's status; no stack trace or input is echoed. The blocking
store calls run in the default executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ValidationError

from saihm.errors import MalformedInput, SaihmError, Unauthenticated
from saihm.provider.models import GraphQuery, MemoryContext, MemoryQuery, MemoryStore
from saihm.provider.records import schema_refusal
from saihm.provider.vault import ConsumerProvider, LocalVault

PREFIX = "/memory/v1"
MAX_BODY = 1 << 20


def _bearer(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer ") or not header[7:].strip():
        raise Unauthenticated("no capability")
    return header[7:].strip()


async def _body(request: web.Request, model: type[BaseModel]) -> Any:
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise MalformedInput("request body too large")
    try:
        return model.model_validate_json(await request.read())
    except ValidationError as err:
        raise schema_refusal(err) from err
    except web.RequestPayloadError as err:
        raise MalformedInput("the request body is malformed") from err


VaultSource = LocalVault | Callable[[], LocalVault]


def _handler(
    vault: VaultSource,
    model: type[BaseModel] | None,
    call: Callable[[ConsumerProvider, Any], Any],
    note_read: ReadNote | None = None,
) -> Callable[[web.Request], Any]:
    async def handle(request: web.Request) -> web.Response:
        try:
            token = _bearer(request)
            bound = vault if isinstance(vault, LocalVault) else vault()
            provider = bound.for_consumer(token)
            body = None if model is None else await _body(request, model)
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(None, call, provider, body)
        except SaihmError as err:
            return web.json_response({"error": err.code}, status=err.status)
        if model is MemoryQuery and note_read is not None:
            note_read(request, token, _records_read(result))
        return web.json_response(result)

    return handle


#: What the serving app does with a consumer's read: ``(request, token, cells)``, called on the
#: event loop after the answer is made (the person's page notes each grant's reads).
ReadNote = Callable[[web.Request, str, int], None]


def _records_read(result: Any) -> int:
    """How many records a query or a context block answered."""
    excerpt = result.get("memory", {}).get("excerpt", result) if "memory" in result else result
    return len(excerpt.get("records", ())) if isinstance(excerpt, dict) else 0


def add_routes(app: web.Application, vault: VaultSource, note_read: ReadNote | None = None) -> None:
    """Add the ``/memory/v1`` routes for ``vault`` to ``app``; ``note_read`` hears of each
    query's and context block's records (:data:`ReadNote`).

    ``vault`` may be a callable that opens the vault per request, so a server started before
    ``saihm memory init`` serves the vault once it exists (404 ``no_vault`` until then).
    """

    def dump(value: BaseModel) -> Any:
        return value.model_dump(mode="json")

    app.router.add_get(f"{PREFIX}/status", _handler(vault, None, lambda p, _: dump(p.status())))
    app.router.add_post(
        f"{PREFIX}/query", _handler(vault, MemoryQuery, lambda p, q: dump(p.query(q)), note_read)
    )
    app.router.add_post(
        f"{PREFIX}/context",
        _handler(
            vault,
            MemoryQuery,
            lambda p, q: MemoryContext(excerpt=p.query(q)).block(),
            note_read,
        ),
    )
    app.router.add_post(
        f"{PREFIX}/graph", _handler(vault, GraphQuery, lambda p, q: dump(p.graph(q)))
    )
    app.router.add_post(
        f"{PREFIX}/store", _handler(vault, MemoryStore, lambda p, q: dump(p.store(q)))
    )
