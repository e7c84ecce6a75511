"""Listening sockets and server TLS contexts, shared by ``saihm serve`` and ``saihm witness
serve`` (both refuse plain HTTP off the loopback). Imports nothing of saihm but the errors, so
the witness need not import the HTTP app's package (DESIGN.md "Layers")."""

from __future__ import annotations

import socket
import ssl

from saihm.errors import MalformedInput

__all__ = ["LOOPBACK", "bind", "tls_context"]

#: The hosts on which plain HTTP is allowed.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context that accepts TLS 1.2 and later only; :class:`MalformedInput` for a
    certificate or key that cannot be loaded (the message names neither file's content)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as err:
        raise MalformedInput("cannot load --tls-cert/--tls-key") from err
    return context


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one), inheritable so that
    ``--workers`` children share it."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock
