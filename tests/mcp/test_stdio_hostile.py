"""The real ``saihm-mcp`` process answers every stdin line as JSON-RPC 2.0 says (issue 32 item 5).

Each hostile line is written followed by a good ``tools/list``; the test reads stdout until
the ``tools/list`` answer arrives and asserts the hostile line got exactly its own answer
before it, so the server both answered and kept serving. ``anyio.fail_after`` only guards
against a hang (the code before this change left 15 kinds of line unanswered).
"""

from __future__ import annotations

import io
import json
import os
import sys
from typing import Any

import anyio
import pytest
from anyio.abc import Process

from saihm.mcp.stdio import MAX_LINE_BYTES, LineFilter, LineWriter
from tests.mcp.fake_operator import SECRET, FakeOperator, json_reply, raw_reply, serve_operator

MIB = 1 << 20


def _call(ident: Any, name: str, arguments_json: str) -> bytes:
    params = '{"name":"' + name + '","arguments":' + arguments_json + "}"
    head = '{"jsonrpc":"2.0","id":' + json.dumps(ident) + ',"method":"tools/call","params":'
    return (head + params + "}").encode()


PARSE = ("error", -32700, None)
INVALID = ("error", -32600, None)

#: (what the line is, the line, the expected answer: ("error", code, id) or ("tool_error", id)).
HOSTILE: list[tuple[str, bytes, tuple[Any, ...]]] = [
    ("not JSON", b"not json at all", PARSE),
    ("not JSON, quoting the token", f"Bearer {SECRET} {{".encode(), PARSE),
    ("bad UTF-8", b'{"jsonrpc":"2.0","id":1,"method":"tools/list"\xff\xfe}', PARSE),
    ("bad UTF-8 alone", b"\xc3\x28\xa0\xa1", PARSE),
    ("a blank line", b"", PARSE),
    ("deep nesting", b"[" * 200_000, PARSE),
    ("two values", b'{"a":1} {"b":2}', PARSE),
    ("null", b"null", INVALID),
    ("an empty batch", b"[]", INVALID),
    ("a batch", b'[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]', INVALID),
    ("a number", b"42", INVALID),
    ("a string", b'"tools/list"', INVALID),
    ("no method", b'{"jsonrpc":"2.0","id":5}', ("error", -32600, 5)),
    ("no method, params", b'{"jsonrpc":"2.0","id":"six","params":{}}', ("error", -32600, "six")),
    ("a bad version", b'{"jsonrpc":"1.0","id":7,"method":"tools/list"}', ("error", -32600, 7)),
    ("a bool id", b'{"jsonrpc":"2.0","id":true}', INVALID),
    (
        "8 MiB",
        _call("big", "saihm_remember", '{"content":"' + "a" * (8 * MIB) + '"}'),
        INVALID,
    ),
    ("8 MiB of junk", b"x" * (8 * MIB), INVALID),
    (
        "remember, lone surrogate",
        _call(8, "saihm_remember", '{"content":"a\\ud800b"}'),
        ("tool", 8),
    ),
    ("recall, lone surrogate", _call(9, "saihm_recall", '{"query":"\\udc00"}'), ("tool", 9)),
    ("forget, surrogate key", _call(10, "saihm_forget", '{"id\\ud800":"x"}'), ("tool", 10)),
    (
        "share, surrogate in a list",
        _call(
            11,
            "saihm_share",
            '{"granteeIdHashesHex":["\\ud83d"],"shardIds":["a"],"type":"temporary","scope":"read"}',
        ),
        ("tool", 11),
    ),
    ("surrogate tool name", _call(12, "saihm_\\ud800", "{}"), ("error", -32600, 12)),
    ("surrogate method", b'{"jsonrpc":"2.0","id":13,"method":"x\\ud800"}', ("error", -32600, 13)),
    (
        "surrogate params",
        b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":"x\\ud800"}',
        ("error", -32600, 14),
    ),
    (
        "surrogate arguments, no version",
        b'{"id":15,"method":"tools/call","params":{"name":"saihm_recall","arguments":{"query":"\\ud800"}}}',
        ("error", -32600, 15),
    ),
    ("surrogate id", b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}', INVALID),
]


async def _line(proc: Process, buffer: bytearray) -> dict[str, Any]:
    assert proc.stdout is not None
    while b"\n" not in buffer:
        buffer.extend(await proc.stdout.receive())
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return json.loads(line)


async def _send(proc: Process, *lines: bytes) -> None:
    assert proc.stdin is not None
    for line in lines:
        await proc.stdin.send(line + b"\n")


def _script() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "saihm-mcp")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "saihm.mcp"]


@pytest.mark.anyio
async def test_saihm_mcp_answers_every_hostile_line_and_keeps_serving() -> None:
    fake = FakeOperator(routes={"saihm_status": json_reply({"agentIdHashHex": "ab" * 32})})
    async with serve_operator(fake) as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAIHM_")}
        env.update(SAIHM_ENDPOINT_URL=url, SAIHM_AUTH_HEADER=f"Bearer {SECRET}")
        printed = bytearray()
        with anyio.fail_after(240):
            async with await anyio.open_process(_script(), env=env) as proc:
                buffer = bytearray()
                await _send(proc, json.dumps(_init()).encode())
                assert (await _line(proc, buffer))["id"] == 0
                await _send(proc, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
                for n, (what, line, expected) in enumerate(HOSTILE):
                    probe = f"probe-{n}"
                    await _send(proc, line, json.dumps(_list(probe)).encode())
                    answers = [await _line(proc, buffer)]
                    while answers[-1].get("id") != probe:
                        answers.append(await _line(proc, buffer))
                    *before, listed = answers
                    assert len(listed["result"]["tools"]) == 8, what
                    assert len(before) == 1, (what, before)
                    _check(what, before[0], expected)
                    printed.extend(json.dumps(before[0]).encode())
                # A good call still works after all of it.
                await _send(proc, _call("last", "saihm_status", "{}"))
                status = await _line(proc, buffer)
                assert status["result"]["structuredContent"]["status"] == "ok"
                assert proc.stdin is not None
                await proc.stdin.aclose()
                assert proc.stderr is not None
                errors = bytearray()
                async for chunk in proc.stderr:
                    errors.extend(chunk)
                assert await proc.wait() == 0
    assert SECRET.encode() not in printed + buffer + errors
    assert b"Traceback" not in errors
    # Nothing of the refused tool calls reached the operator.
    assert fake.methods == ["saihm_status"]


def _init() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "hostile", "version": "1"},
        },
    }


def _list(ident: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/list"}


def _check(what: str, answer: dict[str, Any], expected: tuple[Any, ...]) -> None:
    assert answer["jsonrpc"] == "2.0", what
    if expected[0] == "tool":
        assert answer["id"] == expected[1], what
        assert answer["result"]["isError"] is True, what
        text = answer["result"]["content"][0]["text"]
        assert text.startswith("NOT SENT: an argument of saihm_"), what
        assert "error code: bad_text" in text, what
        return
    _, code, ident = expected
    assert answer["error"]["code"] == code, what
    assert answer["id"] == ident, what
    assert "result" not in answer, what


def _sized(n: int, ident: int) -> bytes:
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"_meta":{"x":"' % ident
    tail = b'"}}}'
    return head + b"a" * (n - len(head) - len(tail)) + tail


@pytest.mark.anyio
async def test_a_line_at_the_bound_is_read_and_one_byte_more_is_answered_and_skipped() -> None:
    at, over, good = _sized(MAX_LINE_BYTES, 1), _sized(MAX_LINE_BYTES + 1, 2), _sized(100, 3)
    stdin = io.BytesIO(b"\n".join([at, over, good]))  # the last line without a newline
    out = io.BytesIO()
    read = [line async for line in LineFilter(stdin, LineWriter(out))]
    assert [len(line) for line in read] == [MAX_LINE_BYTES, 100]
    assert json.loads(out.getvalue()) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": f"Invalid Request: line over {MAX_LINE_BYTES} bytes, not read",
        },
    }


@pytest.mark.anyio
async def test_an_operator_string_holding_a_lone_surrogate_is_answered_and_serving_goes_on() -> (
    None
):
    """Recall plaintext is kept unaltered, but JSON-RPC over stdio is UTF-8: a lone surrogate
    from the operator must not stop the server from answering."""
    own = "ab" * 32
    body = b'[{"cellId":"' + b"c" * 64 + b'","plaintext":"x\\ud800y","holderIdHex":"' + own.encode()
    fake = FakeOperator(
        routes={
            "saihm_status": json_reply({"agentIdHashHex": own}),
            "saihm_recall": raw_reply(body + b'"}]', content_type="application/json"),
        }
    )
    async with serve_operator(fake) as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAIHM_")}
        env.update(SAIHM_ENDPOINT_URL=url, SAIHM_AUTH_HEADER=f"Bearer {SECRET}")
        with anyio.fail_after(120):
            async with await anyio.open_process(_script(), env=env) as proc:
                buffer = bytearray()
                await _send(proc, json.dumps(_init()).encode())
                assert (await _line(proc, buffer))["id"] == 0
                await _send(proc, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
                await _send(
                    proc, _call(1, "saihm_recall", "{}"), json.dumps(_list("after")).encode()
                )
                answers = {}
                while len(answers) < 2:
                    answer = await _line(proc, buffer)
                    answers[answer["id"]] = answer
                assert proc.stdin is not None
                await proc.stdin.aclose()
                assert await proc.wait() == 0
    assert len(answers["after"]["result"]["tools"]) == 8
    recalled = answers[1]["result"]
    assert recalled["isError"] is False
    assert recalled["structuredContent"]["cells"][0]["plaintext"] == "x\ufffdy"
    assert f"[{'c' * 64}] x\ufffdy" in recalled["content"][0]["text"]
