"""A log that answers slowly or short is unreachable, not a bad signature (saihm.audit.fetch).

Each HTTP request of ``saihm mirror``, ``saihm verify URL`` and ``saihm monitor`` has one
deadline for all of it, body included: a server dripping a byte at a time restarts every socket
timeout but cannot hold the reader past the deadline. A body that ends before its
``Content-Length`` (or a chunked body cut short) is the log being unreachable. The server here
is a plain socket on 127.0.0.1 that misbehaves on purpose; each test is bounded by the deadline
it sets, far below the time the server would take to finish.
"""

from __future__ import annotations

import functools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import saihm.audit.fetch
from saihm.audit.fetch import FetchError, HttpSource
from tests.support.cli import run_command

from .conftest import World

DEADLINE = 1.0
#: What the deadline may be overshot by (thread start-up, a loaded machine); the misbehaving
#: server would take at least DRIP_SECONDS, well beyond it.
SLACK = 3.0
#: The server drips one byte per DRIP seconds for DRIP_SECONDS (NOTE is longer than that).
DRIP = 0.1
DRIP_SECONDS = 10.0
NOTE = b"example.com/log\n3\n" + b"A" * 43 + b"=\n\n" + "\u2014 x\n".encode() * 40


@dataclass
class BadLog:
    """A server whose every ``/checkpoint`` (and ``/log/checkpoint``) answer is ``body`` sent
    the ``how`` way: ``drip-body``, ``drip-headers``, ``short`` or ``short-chunked``."""

    how: str
    body: bytes
    stop: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                request = conn.recv(65536).decode("latin-1")
                path = request.split(" ", 2)[1] if " " in request else ""
                if path not in ("/checkpoint", "/log/checkpoint"):
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    return
                self._answer(conn)
            except OSError:
                return  # the client gave up: what a deadline is for

    def _answer(self, conn: socket.socket) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(self.body)}\r\n\r\n".encode()
        if self.how == "drip-body":
            conn.sendall(head)
            self._drip(conn, self.body)
        elif self.how == "drip-headers":
            self._drip(conn, head + self.body)
        elif self.how == "short":
            conn.sendall(head + self.body[: len(self.body) // 2])
        elif self.how == "short-chunked":
            half = self.body[: len(self.body) // 2]
            chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            conn.sendall(chunked + f"{len(self.body):x}\r\n".encode() + half)

    def _drip(self, conn: socket.socket, data: bytes) -> None:
        # One byte per DRIP seconds for DRIP_SECONDS, then the rest: a reader without a
        # deadline gets the whole answer, late.
        dripped = int(DRIP_SECONDS / DRIP)
        for i in range(min(dripped, len(data))):
            if self.stop.wait(DRIP):
                return
            conn.sendall(data[i : i + 1])
        conn.sendall(data[dripped:])


@pytest.fixture
def bad_log() -> Iterator[Callable[[str, bytes], BadLog]]:
    listener = socket.create_server(("127.0.0.1", 0))
    logs: list[BadLog] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=logs[-1].serve, args=(conn,), daemon=True).start()

    def start(how: str, body: bytes) -> BadLog:
        log = BadLog(how, body, url=f"http://127.0.0.1:{listener.getsockname()[1]}")
        logs.append(log)
        if len(logs) == 1:
            threading.Thread(target=accept, daemon=True).start()
        return log

    yield start
    for log in logs:
        log.stop.set()
    listener.close()


@pytest.mark.parametrize("how", ["drip-body", "drip-headers"])
def test_a_dripping_answer_is_unreachable_within_the_deadline(bad_log, how: str) -> None:
    log = bad_log(how, NOTE)
    start = time.monotonic()
    with pytest.raises(FetchError, match="unreachable"):
        HttpSource(log.url, deadline=DEADLINE).get("checkpoint")
    assert time.monotonic() - start < DEADLINE + SLACK


@pytest.mark.parametrize("how", ["short", "short-chunked"])
def test_a_body_shorter_than_announced_is_unreachable(bad_log, how: str) -> None:
    log = bad_log(how, NOTE)
    with pytest.raises(FetchError, match="unreachable"):
        HttpSource(log.url, deadline=DEADLINE).get("checkpoint")


def _published_checkpoint(world: World, tmp_path: Path) -> bytes:
    """A real signed checkpoint, so a whole answer would verify and only the transport fails."""
    assert run_command("publish", ["--data", str(world.data), "--to", str(tmp_path / "pub")]) == 0
    return (tmp_path / "pub" / "checkpoint").read_bytes()


#: Why the fetch gave up, as the commands print it.
REASON = {"drip-body": "no complete answer within", "short": "the body ended after"}
COMMANDS: dict[str, tuple[Callable[[list[str]], int], Callable[[str, Path], list[str]], int]] = {
    "mirror": (
        functools.partial(run_command, "mirror"),
        lambda url, d: [url, str(d / "m"), "--no-progress"],
        2,
    ),
    "verify": (functools.partial(run_command, "verify"), lambda url, d: [url, "--no-progress"], 2),
    "monitor": (
        functools.partial(run_command, "monitor"),
        lambda url, d: [url, "--state", str(d / "s"), "--once"],
        1,
    ),
}


@pytest.mark.parametrize("how", ["drip-body", "short"])
@pytest.mark.parametrize("command", COMMANDS)
def test_the_commands_say_log_unreachable_within_the_deadline(
    bad_log, world: World, tmp_path: Path, capsys, monkeypatch, command: str, how: str
) -> None:
    """``saihm mirror``/``verify URL``/``monitor`` give up on a dripping or short checkpoint
    within the request deadline and call the log unreachable, not its signature bad."""
    log = bad_log(how, _published_checkpoint(world, tmp_path))
    capsys.readouterr()
    monkeypatch.setattr(saihm.audit.fetch, "REQUEST_DEADLINE", DEADLINE)
    run, argv, code = COMMANDS[command]
    start = time.monotonic()
    assert run(argv(log.url, tmp_path)) == code
    assert time.monotonic() - start < DEADLINE + SLACK
    err = capsys.readouterr().err
    assert f"unreachable ({REASON[how]}" in err and "signature" not in err, err
