"""``saihm memory mcp``: RFC 0007 Phase C over MCP, a stdio server separate from ``saihm-mcp``.

RFC 0007 "Migration" (Phase C: "MCP memory excerpt (get_passport_context +
get_memory_context)") and "Passport Context assembly". Two tools, and no others, so the SAIHM
client (``saihm-mcp``) keeps exactly the protocol's eight:

- ``get_memory_context``: a ``MemoryExcerpt`` from ``POST /memory/v1/query``. Requested
  namespaces are narrowed to the grant and a namespace outside it is refused by the provider
  (RFC "Phase C notes"); ``limit``, ``max_bytes``, ``intent`` and ``text`` are passed through.
- ``get_passport_context``: the consumer's grant (``GET /memory/v1/status``), the names of the
  passport ``sections`` it grants (a requested section outside them is refused: the provider
  enforces the names, the passport owns their content) and the ``memory`` block
  ``{"provider", "excerpt"}`` (``POST /memory/v1/context``).

Configuration is the SAIHM client's: ``SAIHM_ENDPOINT_URL`` (the operator's root URL, as
``saihm serve`` answers it), ``SAIHM_AUTH_HEADER`` (``Bearer <consumer token>`` from ``saihm
memory grant``), ``SAIHM_TIMEOUT_SECONDS``, ``SAIHM_CA_FILE``, ``SAIHM_TLS_PIN_SHA256``. The
transport is :mod:`saihm.client._transport` (https only but to 127.0.0.1/localhost, no
redirects, bounded responses, no credential in any text). Like ``saihm.mcp`` this module
imports no store code and does no cryptography; nothing is read or built at import time and
listing the tools contacts nobody.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

import aiohttp
from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from saihm.client._endpoint import check_auth_header, parse_pin, validate_endpoint
from saihm.client._env import EnvSettings, read_env
from saihm.client._transport import (
    Target,
    make_ssl_context,
    new_session,
    parse_json,
    read_bounded,
)
from saihm.client.errors import ClientError
from saihm.mcp.server import StrictMCPServer
from saihm.names import namespace_problem

__all__ = ["MEMORY_TOOL_NAMES", "MemoryEndpoint", "build_memory_mcp", "main"]

log = logging.getLogger(__name__)

MEMORY_TOOL_NAMES = ("get_memory_context", "get_passport_context")
PREFIX = "memory/v1"
_READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
# What fixes a refusal, by the provider's error code; never quotes the credential.
_ADVICE = {
    "unauthenticated": "the consumer token is missing, expired or revoked; ask the person for a "
    "new one (saihm memory grant CONSUMER --memory NS,...)",
    "namespace_not_granted": "a requested namespace is outside this consumer's grant; ask "
    "without it, or ask the person to widen the grant",
    "mode_not_granted": "this consumer's grant does not allow reading memory",
    "not_consumer": "SAIHM_AUTH_HEADER must carry a consumer token from saihm memory grant, "
    "not a session token",
    "no_vault": "the operator has no vault yet (saihm memory init)",
    "bad_namespace": "a namespace must be 1 to 256 printable characters without control, "
    "format, bidi or invisible characters and without surrounding whitespace",
    "section_not_granted": "a requested passport section is outside this consumer's grant",
}


class MemoryEndpoint:
    """The ``/memory/v1`` routes of one operator, called with one consumer's token.

    Settings are checked on each call, so a tool reports a missing or bad endpoint or
    credential (as ``{"error": "config"}``) instead of the server failing to start.
    """

    def __init__(self, settings: EnvSettings) -> None:
        self._settings = settings

    def __repr__(self) -> str:
        return "MemoryEndpoint(...)"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MemoryEndpoint:
        """The endpoint the ``SAIHM_*`` variables of ``env`` name (see :mod:`saihm.client._env`)."""
        return cls(read_env(env))

    def _target(self, path: str) -> Target:
        s = self._settings
        base = validate_endpoint(s.endpoint_url, "SAIHM_ENDPOINT_URL", "SAIHM_AUTH_HEADER")
        auth = check_auth_header(s.auth_header, "SAIHM_AUTH_HEADER")
        pin = parse_pin(s.tls_pin_sha256, "SAIHM_TLS_PIN_SHA256")
        context = make_ssl_context(s.ca_file, "SAIHM_CA_FILE") if s.ca_file else None
        url = base.split("?", 1)[0].rstrip("/") + f"/{PREFIX}/{path}"
        return Target(
            url=url, auth=auth, ssl_context=context, pin=pin, timeout_seconds=s.timeout_seconds
        )

    async def call(self, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        """(HTTP status, parsed JSON) of ``GET`` (``body`` None) or ``POST`` to ``path``.

        Raises :class:`ClientError` for a configuration problem, a redirect, a timeout, a
        connection failure or a 2xx body that is not JSON; a 4xx/5xx is returned, its body
        ``None`` when it is not JSON.
        """
        target = self._target(path)
        headers = {"Authorization": target.auth, "Content-Type": "application/json"}
        data = None if body is None else json.dumps(body).encode("utf-8")
        ssl_arg: Any = target.ssl_context if target.ssl_context is not None else True
        try:
            async with asyncio.timeout(target.timeout_seconds), new_session(target) as session:
                method = "GET" if body is None else "POST"
                async with session.request(
                    method,
                    target.url,
                    data=data,
                    headers=headers,
                    allow_redirects=False,
                    ssl=ssl_arg,
                ) as resp:
                    if 300 <= resp.status < 400:
                        raise ClientError(
                            f"HTTP {resp.status}: redirect refused",
                            kind="redirect",
                            http_status=resp.status,
                        )
                    raw = await read_bounded(resp.content, target.max_response_bytes)
                    try:
                        return resp.status, parse_json(raw)
                    except (ValueError, RecursionError) as err:
                        if not 200 <= resp.status < 300:
                            return resp.status, None  # e.g. a 404 page: a refusal, no code
                        raise ClientError(
                            f"HTTP {resp.status} with a body that is not JSON: probably not "
                            "the operator",
                            kind="intermediary",
                            http_status=resp.status,
                        ) from err
        except ClientError:
            raise
        except TimeoutError as err:
            raise ClientError(f"no response from {target.where} in time", kind="timeout") from err
        except (aiohttp.ClientError, OSError, ValueError, UnicodeError) as err:
            # The library's text may quote the URL or a header: only its type is shown.
            raise ClientError(
                f"HTTP error ({type(err).__name__}) talking to {target.where}", kind="http"
            ) from err


def _result(text: str, structured: dict[str, Any], is_error: bool) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=is_error,
    )


def _failure(status: int | None, code: str) -> CallToolResult:
    advice = _ADVICE.get(code, "")
    shown = f"HTTP {status} " if status else ""
    text = f"refused: {shown}{code}" + (f" ({advice})" if advice else "")
    body: dict[str, Any] = {"error": code}
    if status:
        body["httpStatus"] = status
    return _result(text, body, True)


def _bad_namespaces(namespaces: list[str] | None) -> CallToolResult | None:
    """The refusal, before anything is sent, of namespaces that are not names (saihm.names)."""
    if any(namespace_problem(n) is not None for n in namespaces or ()):
        return _failure(None, "bad_namespace")
    return None


async def _guarded(run: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult:
    """``run()``, with every client failure reported as a tool error that quotes no secret."""
    try:
        return await run()
    except ClientError as err:
        code = "config" if err.kind == "config" else "unavailable"
        return _result(f"{code}: {err}", {"error": code}, True)
    except Exception as err:
        log.error("saihm memory mcp: internal error %s", type(err).__name__)
        return _result("internal error (details withheld)", {"error": "internal"}, True)


def render_excerpt(excerpt: Mapping[str, Any]) -> str:
    """A readable report of a ``MemoryExcerpt``: one line per record, newest first."""
    records = excerpt.get("records") or []
    if not records:
        return "no memory records matched"
    more = " (truncated)" if excerpt.get("truncated") else ""
    lines = [f"{len(records)} memory record(s){more}"]
    for r in records:
        content = r.get("content")
        shown = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        lines.append(f"- [{r.get('namespace')}] {shown} (id {r.get('id')}, {r.get('created_at')})")
    return "\n".join(lines)


def _query(
    namespaces: list[str] | None,
    intent: str | None,
    limit: int,
    max_bytes: int | None,
    text: str | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"namespaces": list(namespaces or []), "limit": limit}
    for name, value in (("intent", intent), ("max_bytes", max_bytes), ("text", text)):
        if value is not None:
            body[name] = value
    return body


Namespaces = Annotated[
    list[str] | None,
    Field(description="Namespaces to read; absent or empty = every namespace the grant allows."),
]
Intent = Annotated[
    str | None, Field(description='Why the context is wanted, e.g. "coding_context".')
]
Limit = Annotated[int, Field(ge=1, le=500, description="At most this many records.")]


def build_memory_mcp(endpoint: MemoryEndpoint) -> MCPServer:
    """An MCP server with exactly :data:`MEMORY_TOOL_NAMES` over ``endpoint`` (RFC 0007 Phase C).

    Building it contacts nobody; each tool call re-sends the consumer's token, so the
    provider's grant check (expiry, revocation, namespaces, mode) applies on every call.
    """
    mcp = StrictMCPServer(
        name="saihm-memory",
        instructions="RFC 0007 memory provider (local-vault): read-only context for one consumer.",
    )

    @mcp.tool(name="get_memory_context", annotations=_READ_ONLY)
    async def get_memory_context(
        namespaces: Namespaces = None,
        intent: Intent = None,
        limit: Limit = 20,
        max_bytes: Annotated[
            int | None, Field(ge=1, description="Byte budget of the excerpt (compact JSON).")
        ] = None,
        text: Annotated[
            str | None, Field(description="Keywords every record's content must contain.")
        ] = None,
    ) -> CallToolResult:
        """Memory records this consumer's grant allows, newest first (RFC 0007 MemoryExcerpt).

        A namespace outside the grant is refused, not silently dropped.
        """

        async def run() -> CallToolResult:
            if (refused := _bad_namespaces(namespaces)) is not None:
                return refused
            body = _query(namespaces, intent, limit, max_bytes, text)
            status, got = await endpoint.call("query", body)
            if status != 200 or not isinstance(got, dict) or "records" not in got:
                code = got.get("error") if isinstance(got, dict) else None
                return _failure(status, str(code or "failed"))
            return _result(render_excerpt(got), got, False)

        return await _guarded(run)

    @mcp.tool(name="get_passport_context", annotations=_READ_ONLY)
    async def get_passport_context(
        namespaces: Namespaces = None,
        intent: Intent = None,
        limit: Limit = 20,
        sections: Annotated[
            list[str] | None,
            Field(description="Passport sections wanted; absent = every section granted."),
        ] = None,
    ) -> CallToolResult:
        """The consumer's grant and its memory block, which holds the provider and an excerpt
        (RFC 0007 "Passport Context assembly"); consumers that do not understand it ignore it.

        A requested section or namespace outside the grant is refused.
        """

        async def run() -> CallToolResult:
            if (refused := _bad_namespaces(namespaces)) is not None:
                return refused
            status, grant = await endpoint.call("status", None)
            if status != 200 or not isinstance(grant, dict) or "consumer" not in grant:
                code = grant.get("error") if isinstance(grant, dict) else None
                return _failure(status, str(code or "failed"))
            if "query" not in (grant.get("capabilities") or ()):
                return _failure(403, "mode_not_granted")
            granted = list(grant.get("sections") or [])
            if sections is not None and not set(sections) <= set(granted):
                return _failure(403, "section_not_granted")
            body = _query(namespaces, intent, limit, None, None)
            status, block = await endpoint.call("context", body)
            if status != 200 or not isinstance(block, dict) or "memory" not in block:
                code = block.get("error") if isinstance(block, dict) else None
                return _failure(status, str(code or "failed"))
            context = {
                "consumer": grant.get("consumer"),
                "grant": {"mode": grant.get("mode"), "namespaces": grant.get("namespaces")},
                "sections": granted if sections is None else [x for x in granted if x in sections],
                **block,
            }
            text = f"passport context for {grant.get('consumer')}\n" + render_excerpt(
                block["memory"].get("excerpt") or {}
            )
            return _result(text, context, False)

        return await _guarded(run)

    return mcp


def main(env: Mapping[str, str] | None = None) -> int:
    """``saihm memory mcp``: serve :func:`build_memory_mcp` over stdio until stdin closes.

    An endpoint or credential problem is reported by each tool call; only an unusable
    ``SAIHM_TIMEOUT_SECONDS`` stops it before serving: a ``ClientError``, which the command
    line prints as one line (exit 2).
    """
    endpoint = MemoryEndpoint.from_env(os.environ if env is None else env)
    build_memory_mcp(endpoint).run(transport="stdio")
    return 0
