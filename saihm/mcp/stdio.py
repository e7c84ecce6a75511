"""Serving MCP over stdio so that every line read gets its JSON-RPC answer.

The SDK's stdio transport drops a line it cannot validate (not JSON, bad UTF-8, ``null``,
``[]``, a request without a method, a lone surrogate) without a word, and reads a line of any
length. Here a thin reader sits in front of it: it reads stdin in bytes, at most
:data:`MAX_LINE_BYTES` a line, and hands the SDK only lines it will accept; every other line
is answered here as JSON-RPC 2.0 says, and the next line is read:

- over :data:`MAX_LINE_BYTES`: -32600 (the rest of the line is read and dropped);
- not UTF-8, or not JSON (a blank line included): -32700 parse error, ``id`` null;
- JSON that is not a JSON-RPC message (``null``, ``[]`` or any array: batches are not part
  of MCP; an object without ``method``, ...): -32600 invalid request;
- a string holding a lone surrogate (``"\\ud800"``, which is JSON but not Unicode text): in
  the ``arguments`` of a ``tools/call``, a tool error result (``isError``: nothing was sent);
  anywhere else, -32600.

An error answer carries the request's ``id`` when it has a usable one (a string of Unicode
text or an integer), else ``null``, and never quotes the line: a line may hold anything,
the credential included. While serving, fd 0 reads the null device and fd 1 writes to
stderr (as the SDK's own transport does), so a stray read or print cannot touch the wire.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator
from typing import Any, BinaryIO, cast

import anyio
import anyio.to_thread
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.types import INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter
from pydantic import ValidationError

from saihm.mcp.checks import printable

__all__ = [
    "MAX_LINE_BYTES",
    "LineFilter",
    "LineWriter",
    "answer_for",
    "claim_wire",
    "has_lone_surrogate",
    "serve_stdio",
    "unicode_safe",
]

#: The longest line read (bytes, newline excluded): four times the operator's default request
#: bound (1 MiB), room for JSON escapes of the largest content it accepts.
MAX_LINE_BYTES = 4 << 20
_CHUNK = 1 << 16


_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_safe(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD.

    JSON text may escape one (``"\\ud800"``) but UTF-8 cannot carry it, and the SDK cannot
    write an answer holding one: an operator's string is made safe before it is answered.
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {unicode_safe(k): unicode_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unicode_safe(v) for v in value]
    return value


def has_lone_surrogate(value: Any) -> bool:
    """Whether a string of ``value`` (a key included) holds a lone surrogate."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(v) for v in value)
    return False


def _usable_id(message: Any) -> str | int | None:
    """The message's ``id`` when an answer may carry it, else None."""
    ident = message.get("id") if isinstance(message, dict) else None
    if isinstance(ident, int) and not isinstance(ident, bool):
        return ident
    if isinstance(ident, str) and not has_lone_surrogate(ident):
        return ident
    return None


def _error(ident: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


def _tool_refusal(ident: str | int | None, message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    tool = name if isinstance(name, str) and printable(name) and len(name) <= 64 else "the tool"
    text = (
        f"NOT SENT: an argument of {tool} holds text that is not valid Unicode (a lone "
        "surrogate, such as \\ud800); nothing was sent. Call it again with the text as "
        "written.\n  error code: bad_text"
    )
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "result": {"content": [{"type": "text", "text": text}], "isError": True},
    }


def answer_for(raw: bytes) -> tuple[str | None, dict[str, Any] | None]:
    """``(line for the SDK, None)`` for a line the SDK accepts, else ``(None, answer)``.

    ``raw`` is one line without its newline, at most :data:`MAX_LINE_BYTES` long.
    """
    try:
        text = raw.decode("utf-8")
        message = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, _error(None, PARSE_ERROR, "Parse error: the line is not JSON text")
    ident = _usable_id(message)
    if isinstance(message, list):
        return None, _error(None, INVALID_REQUEST, "Invalid Request: batches are not supported")
    if not isinstance(message, dict):
        return None, _error(None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC object")
    if has_lone_surrogate(message):
        params = message.get("params")
        # A call whose surrogates are all in its arguments is well formed: its text is not.
        clean = (
            dict(message, params={**params, "arguments": {}})
            if isinstance(params, dict)
            else message
        )
        if (
            message.get("method") == "tools/call"
            and ident is not None
            and not has_lone_surrogate(clean)
            and _is_message(clean)
        ):
            return None, _tool_refusal(ident, message)
        return None, _error(
            ident, INVALID_REQUEST, "Invalid Request: text that is not valid Unicode"
        )
    try:
        jsonrpc_message_adapter.validate_json(text, by_name=False)  # as the SDK reads a line
    except ValidationError:
        return None, _error(ident, INVALID_REQUEST, "Invalid Request: not a JSON-RPC message")
    return text, None


def _is_message(message: dict[str, Any]) -> bool:
    """Whether the SDK accepts ``message`` (as its stdio transport validates a line)."""
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return False
    return True


def _over_long() -> dict[str, Any]:
    return _error(
        None, INVALID_REQUEST, f"Invalid Request: line over {MAX_LINE_BYTES} bytes, not read"
    )


class LineFilter:
    """The stdin side: yields the lines the SDK accepts, answers every other one on stdout."""

    def __init__(self, stdin: BinaryIO, out: LineWriter) -> None:
        self._stdin = stdin
        self._out = out

    def _read_line(self) -> tuple[bytes, bool] | None:
        """(line without its newline, whether it was over the bound); None at end of input."""
        line = self._stdin.readline(MAX_LINE_BYTES + 1)
        if not line:
            return None
        if line.endswith(b"\n"):
            return line[:-1].removesuffix(b"\r"), False
        if len(line) <= MAX_LINE_BYTES:
            return line, False  # the last line, without a newline
        rest = self._stdin.readline(_CHUNK)
        while rest and not rest.endswith(b"\n"):
            rest = self._stdin.readline(_CHUNK)
        return b"", True

    async def __aiter__(self) -> AsyncIterator[str]:
        while True:
            read = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
            if read is None:
                return
            raw, over = read
            line, answer = (None, _over_long()) if over else answer_for(raw)
            if answer is not None:
                await self._out.write(json.dumps(answer, separators=(",", ":")) + "\n")
                await self._out.flush()
            elif line is not None:
                yield line


class LineWriter:
    """The stdout side, shared by the SDK's answers and :class:`LineFilter`'s: one line a write."""

    def __init__(self, stdout: BinaryIO) -> None:
        self._stdout = stdout
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        data = text.encode("utf-8", errors="replace")
        async with self._lock:
            await anyio.to_thread.run_sync(self._stdout.write, data)

    async def flush(self) -> None:
        async with self._lock:
            await anyio.to_thread.run_sync(self._stdout.flush)


def claim_wire() -> tuple[BinaryIO, BinaryIO]:
    """The wire's (stdin, stdout); fd 0 then reads the null device and fd 1 writes to stderr.

    For the console script, which exits when serving ends: nothing is restored.
    """
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    return os.fdopen(wire_in, "rb"), os.fdopen(wire_out, "wb")


async def serve_stdio(server: Server[Any], stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Run ``server`` over ``stdin``/``stdout`` until stdin ends, answering every line."""
    out = LineWriter(stdout)
    lines = LineFilter(stdin, out)
    async with stdio_server(stdin=cast(Any, lines), stdout=cast(Any, out)) as (read, write):
        await server.run(read, write, server.create_initialization_options())
