"""No secret in any log or error (issue 11, Build 5): what the HTTP parser refuses.

docs/security.md: "A request aiohttp's HTTP parser refuses ... is answered {"error":
"bad_request"} (431 for oversize headers, 400 otherwise), and the log line names only the
exception's class: no header value, so no token, reaches the log."

Each case runs against the real ``saihm serve`` over a raw socket, with a real token inside the
malformed request, then the server's stdout and stderr are scanned for the token and for every
16-character run of it.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from saihm.events.capability import HEADER_FIELD_MAX
from saihm.http.guard import REQUEST_LINE_MAX, parser_error_status
from tests.support.serve import fetch, holder_create, post, serving

RECV_SECONDS = 10


def _exchange(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw``; read until the server closes; (status, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=RECV_SECONDS) as sock:
        sock.sendall(raw)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    data = b"".join(chunks)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def _request(token: str, *, auth_tail: bytes = b"", line: bytes = b"POST / HTTP/1.1") -> bytes:
    body = b'{"method":"saihm_status","params":{}}'
    return (
        line
        + b"\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        + token.encode()
        + auth_tail
        + b"\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def _cases(token: str) -> list[tuple[str, bytes, int]]:
    t = token.encode()
    body = b'{"method":"saihm_status","params":{}}'
    return [
        ("stray CR after the token", _request(token, auth_tail=b"\r"), 400),
        ("control byte after the token", _request(token, auth_tail=b"\x01"), 400),
        ("NUL after the token", _request(token, auth_tail=b"\x00"), 400),
        ("DEL inside the header", _request(token, auth_tail=b"\x7f" + t[:20]), 400),
        (
            "Authorization over the header limit",
            _request(token, auth_tail=b"A" * (HEADER_FIELD_MAX + 10)),
            431,
        ),
        (
            "too many headers, each with the token",
            b"GET / HTTP/1.1\r\nHost: x\r\n"
            + b"".join(b"X-T%d: %s\r\n" % (i, t) for i in range(200))
            + b"\r\n",
            431,
        ),
        (
            "request line over its limit, token in the query",
            _request(token, line=b"GET /?t=" + t + b"x" * REQUEST_LINE_MAX + b" HTTP/1.1"),
            400,
        ),
        ("bad request line", _request(token, line=b"PO ST / HTTP/1.1"), 400),
        ("bad method with the token", _request(token, line=b"G\x01T /" + t + b" HTTP/1.1"), 400),
        ("bad version", _request(token, line=b"POST / HTTP/9.Z"), 400),
        (
            "space in a header name",
            b"POST / HTTP/1.1\r\nHost: x\r\nAuthoriz ation: Bearer " + t + b"\r\n\r\n",
            400,
        ),
        (
            "obsolete line folding of the token",
            b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n " + t + b"\r\n\r\n",
            400,
        ),
        (
            "Content-Length and Transfer-Encoding both",
            b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + t
            + b"\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        (
            "bad chunk size after a valid header",
            b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + t
            + b"\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
            + body
            + b"\r\n0\r\n\r\n",
            400,
        ),
        (
            "duplicate Content-Length",
            b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + t
            + b"\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
            400,
        ),
    ]


def _leaks(token: str, text: str) -> list[str]:
    return [token[i : i + 16] for i in range(len(token) - 15) if token[i : i + 16] in text]


@pytest.fixture(params=["llhttp", "python"])
def parser(request, monkeypatch):
    """Both of aiohttp's request parsers: the C one (llhttp) and the pure-Python fallback."""
    if request.param == "python":
        monkeypatch.setenv("AIOHTTP_NO_EXTENSIONS", "1")
    else:
        monkeypatch.delenv("AIOHTTP_NO_EXTENSIONS", raising=False)
    return request.param


def test_parser_refusals_answer_json_and_never_log_the_token(tmp_path: Path, parser):
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_proc, url):
        port = int(url.rsplit(":", 1)[1].strip("/"))
        token = holder_create(data)["token"]
        assert post(url, token, "saihm_status", {})[0] == 200
        answers = {}
        for name, raw, expected in _cases(token):
            status, headers, body = _exchange(port, raw)
            answers[name] = (status, expected)
            assert status == expected, name
            assert headers.get("content-type", "").startswith("application/json"), name
            assert json.loads(body) == {"error": "bad_request"}, name
            assert token[:16].encode() not in body, name
        # the server is still serving after every refusal
        assert post(url, token, "saihm_status", {})[0] == 200
        # a token in a query string or a header of an accepted request is not logged either
        # (the access log writes the path only, aiohttp's own access log is off)
        status, _ = fetch(url + "log/checkpoint?token=" + token, headers={"X-Token": token})
        assert status == 200
    logs = (tmp_path / "serve.err").read_text() + (tmp_path / "serve.out").read_text()
    assert _leaks(token, logs) == []
    refusals = [line for line in logs.splitlines() if "HTTP parser could not read" in line]
    assert len(refusals) >= len(_cases(token)) - 1  # the chunk error may surface in the handler
    assert "Traceback" not in logs


def test_a_refusal_log_line_names_the_exception_class_and_status_only(tmp_path: Path, parser):
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_proc, url):
        port = int(url.rsplit(":", 1)[1].strip("/"))
        token = holder_create(data)["token"]
        _exchange(port, _request(token, auth_tail=b"\r"))
    records = [
        json.loads(line)
        for line in (tmp_path / "serve.err").read_text().splitlines()
        if "HTTP parser" in line
    ]
    assert len(records) == 1
    # A JSON log line (saihm/logs.py): its fields are the time, level, logger, pid and message.
    assert set(records[0]) == {"ts", "level", "logger", "msg", "pid"}
    assert re.fullmatch(
        r"refused a request the HTTP parser could not read: [A-Za-z]+ \(400\)", records[0]["msg"]
    )


def test_the_longest_issuable_token_is_read_by_the_server(tmp_path: Path):
    """A token of exactly ISSUABLE_TOKEN_CHARS passes the parser (refused 401 by the store,
    not 431); a token as long as the field limit is refused 431 by the parser."""
    from saihm.events.capability import ISSUABLE_TOKEN_CHARS

    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_proc, url):
        port = int(url.rsplit(":", 1)[1].strip("/"))
        close = b"HTTP/1.1\r\nConnection: close\r\n"
        fits = _request("A" * ISSUABLE_TOKEN_CHARS).replace(b"HTTP/1.1\r\n", close, 1)
        status, _, body = _exchange(port, fits)
        assert status == 401 and json.loads(body)["error"] in {"unauthenticated", "invalid_token"}
        # a token as long as the whole field limit cannot fit, whichever parser counts
        over = "A" * HEADER_FIELD_MAX
        status, _, body = _exchange(port, _request(over))
        assert status == 431 and json.loads(body) == {"error": "bad_request"}


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        ("header", 431),
        ("line", 400),
        ("many", 431),
        ("other", 400),
        (None, 400),
    ],
)
def test_parser_error_status(exc, status):
    from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

    made = {
        "header": LineTooLong(b"x", HEADER_FIELD_MAX),
        "line": LineTooLong(b"x", REQUEST_LINE_MAX),
        "many": BadHttpMessage("Too many headers received"),
        "other": BadHttpMessage("Invalid header value char"),
        None: None,
    }[exc]
    assert parser_error_status(made) == status
