"""A scripted, hostile fake operator and helpers to drive the MCP client against it.

The fake is an aiohttp web server on 127.0.0.1 started inside each test; a raw asyncio
server covers answers aiohttp's server refuses to produce (truncated bodies, hostile reason
phrases). Nothing here sleeps: a stalled answer waits on an event that is set only at
teardown.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import mcp
from aiohttp import web
from mcp import StdioServerParameters
from mcp.types import CallToolResult

from saihm.mcp import ClientConfig, OperatorClient, build_mcp

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MIB = 1024 * 1024
OWN_ID = "ab" * 32
OTHER_ID = "cd" * 32
CELL_ID = "d851960a5b7754c5884c96bef5d615e666c8ad006e4ceebe028cd85aae8e7c2f"
SECRET = "s3cr3t-token-value"


def json_reply(body: Any, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, text=json.dumps(body), content_type="application/json")

    return handler


def raw_reply(
    body: bytes, status: int = 200, content_type: str = "text/html", reason: str | None = None
) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, body=body, content_type=content_type, reason=reason)

    return handler


def redirect_reply(status: int, location: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})

    return handler


def chunked_reply(total: int, status: int = 200) -> Handler:
    """A chunked JSON-looking body of ``total`` bytes with no Content-Length."""

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=status, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        chunk = b" " * MIB
        sent = 0
        try:
            await resp.write(b"[")
            while sent < total:
                await resp.write(chunk)
                sent += len(chunk)
            await resp.write(b"]")
        except (ConnectionError, RuntimeError):
            pass  # The client hung up once over its bound, as it should.
        return resp

    return handler


@dataclass
class FakeOperator:
    """Records every request and answers each method by its scripted handler."""

    routes: dict[str, Handler] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    default: Handler = field(default_factory=lambda: json_reply({"error": "unscripted"}, 500))

    def stall(self) -> Handler:
        """A handler that waits on an event that never fires during the test."""

        async def handler(request: web.Request) -> web.StreamResponse:
            await self.release.wait()
            return web.Response(status=503)

        return handler

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        self.requests.append({"headers": dict(request.headers), "body": body, "raw": raw})
        return await self.routes.get(body.get("method"), self.default)(request)

    @property
    def methods(self) -> list[str]:
        return [r["body"]["method"] for r in self.requests]


@asynccontextmanager
async def serve(
    handler: Handler,
    ssl_context: ssl.SSLContext | None = None,
    on_exit: Callable[[], None] | None = None,
) -> AsyncIterator[int]:
    """Serve ``handler`` on 127.0.0.1 and yield the port."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield port
    finally:
        if on_exit is not None:
            on_exit()
        await runner.cleanup()


@asynccontextmanager
async def serve_operator(
    fake: FakeOperator, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[str]:
    """Serve ``fake`` and yield its endpoint URL (http, or https with ``ssl_context``)."""
    scheme = "https" if ssl_context else "http"
    async with serve(fake.handle, ssl_context, on_exit=fake.release.set) as port:
        yield f"{scheme}://127.0.0.1:{port}/saihm"


@asynccontextmanager
async def serve_raw(response: bytes) -> AsyncIterator[str]:
    """A raw TCP server: reads one request, writes ``response`` verbatim, then closes."""

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await reader.readexactly(length)
        writer.write(response)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/saihm"
    finally:
        server.close()
        await server.wait_closed()


def config(url: str | None, **overrides: Any) -> ClientConfig:
    values: dict[str, Any] = {
        "endpoint_url": url,
        "auth_header": f"Bearer {SECRET}",
        "timeout_seconds": 5.0,
    }
    values.update(overrides)
    return ClientConfig(**values)


async def run_tools(cfg: ClientConfig, *calls: tuple[str, dict[str, Any]]) -> list[CallToolResult]:
    """Call the tools in order through one in-process MCP client and server."""
    server = build_mcp(OperatorClient(cfg))
    results = []
    async with mcp.Client(server, raise_exceptions=True) as client:
        for name, args in calls:
            results.append(await client.call_tool(name, args))
    return results


async def run_tool(
    cfg: ClientConfig, name: str, args: dict[str, Any] | None = None
) -> CallToolResult:
    return (await run_tools(cfg, (name, args or {})))[0]


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def everything_printed(result: CallToolResult) -> str:
    """All text and structured content a tool result carries, as one string."""
    return text_of(result) + "\n" + json.dumps(result.structured_content, ensure_ascii=False)


def stdio_server_parameters(env: dict[str, str]) -> StdioServerParameters:
    """Launch the installed ``saihm-mcp`` console script over stdio with ``env`` added.

    Falls back to ``python -m saihm.mcp`` when the script is not beside the interpreter.
    """
    script = os.path.join(os.path.dirname(sys.executable), "saihm-mcp")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SAIHM_")}
    full_env.update(env)
    if os.path.exists(script):
        return StdioServerParameters(command=script, args=[], env=full_env)
    return StdioServerParameters(command=sys.executable, args=["-m", "saihm.mcp"], env=full_env)
