"""Where a mirror or a verifier reads a tiled log from: a URL, or a directory on disk.

Both answer ``get(path)`` for the c2sp.org/tlog-tiles resources under the log's *prefix*:
``checkpoint``, ``tile/<L>/<N>[.p/<W>]``, ``tile/entries/<N>[.p/<W>]``, and ``v1/keys`` (the
checkpoint verifier keys; served by ``saihm serve`` and written by ``saihm publish``). ``get``
returns the bytes, or None when the resource does not exist (HTTP 404, no such file).

``HttpSource`` takes either a tlog-tiles prefix (a published directory behind a static web
server or CDN: ``URL/checkpoint``) or the base URL of a running operator (``URL/log/checkpoint``)
and finds which on first use. Each request has one deadline for all of it (connecting, the
headers and the whole body; ``REQUEST_DEADLINE`` seconds unless the source is given another):
a server that drips its answer a byte at a time cannot hold a reader past it, however often each
byte would restart a socket timeout. A request that misses its deadline, or whose body ends
before its ``Content-Length``, is the log being unreachable (``FetchError``), never a short body
handed on to be misread as a bad signature. It asks for ``Accept-Encoding: gzip, identity``
(tlog-tiles: "Clients SHOULD include gzip and identity") and decompresses a gzip body within a
bound, so a hostile server cannot make it inflate more than the largest entry bundle.
``Prefetch`` wraps a source to fetch named paths ahead in threads (network I/O releases the
GIL), each handed out once.

``tile_nodes(source, size)`` is the ``saihm.translog.proof`` fetch over a source's tiles: roots
and proofs of the tree of ``size`` from the hash tiles alone (``proof.root(n, nodes)``,
``proof.inclusion_proof(i, n, nodes)``, ...), each tile fetched at most once.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from saihm.errors import MalformedInput, NotFound, SaihmError
from saihm.translog.tilenodes import ReadTile, TileNodes
from saihm.translog.tiles import tile_path, tile_widths

__all__ = [
    "DirSource",
    "FetchError",
    "HttpSource",
    "Prefetch",
    "Source",
    "open_source",
    "tile_nodes",
    "tile_reader",
]

#: The largest resource a tiled log serves: a full entry bundle of 256 leaves of 65,535 bytes.
MAX_RESOURCE = 256 * (2 + 0xFFFF)
#: Seconds one HTTP request may take in all (connect, headers, body) unless told otherwise.
REQUEST_DEADLINE = 30.0


class FetchError(SaihmError):
    """The log could not be read: unreachable, an HTTP error other than 404, or a bad body."""


class Source:
    """A read-only view of a tiled log's resources (see the module docstring)."""

    name: str = ""

    def get(self, path: str) -> bytes | None:
        """The resource at ``path`` under the prefix, or None if it does not exist."""
        raise NotImplementedError

    def require(self, path: str) -> bytes:
        """The resource at ``path``; raise ``FetchError`` if it does not exist."""
        data = self.get(path)
        if data is None:
            raise FetchError(f"{self.name}: {path} is missing")
        return data


class DirSource(Source):
    """A directory in the tlog-tiles layout (a mirror or a publication)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.name = str(root)
        if not (self.root / "checkpoint").is_file():
            raise NotFound(f"{root} holds no tiled log (no checkpoint file)")

    def get(self, path: str) -> bytes | None:
        try:
            with (self.root / path).open("rb") as f:
                data = f.read(MAX_RESOURCE + 1)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise FetchError(f"{self.name}/{path}: {err.strerror}") from err
        if len(data) > MAX_RESOURCE:
            raise FetchError(f"{self.name}/{path} is larger than any tlog-tiles resource")
        return data


class HttpSource(Source):
    """A tiled log over HTTP(S) (see the module docstring for the prefix rule).

    ``deadline`` is the time in seconds one request may take in all, body included (default
    ``REQUEST_DEADLINE``).
    """

    def __init__(self, url: str, *, deadline: float | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise MalformedInput(f"not an http(s) URL: {url}")
        self.url = url.rstrip("/")
        self.name = self.url
        self.deadline = REQUEST_DEADLINE if deadline is None else deadline
        self._prefix: str | None = None

    @property
    def prefix(self) -> str:
        """The tlog-tiles prefix: the URL itself, or ``URL/log`` for a running operator."""
        if self._prefix is None:
            for candidate in (self.url, self.url + "/log"):
                if self._fetch(candidate + "/checkpoint") is not None:
                    self._prefix = candidate
                    break
            else:
                raise FetchError(f"{self.url}: no checkpoint at /checkpoint or /log/checkpoint")
        return self._prefix

    def get(self, path: str) -> bytes | None:
        return self._fetch(f"{self.prefix}/{path}")

    def _fetch(self, url: str) -> bytes | None:
        request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip, identity"})
        with _Deadline(self.deadline) as deadline:
            try:
                with deadline.opener().open(request, timeout=self.deadline) as response:
                    body: bytes = response.read(MAX_RESOURCE + 1)
                    coding = (response.headers.get("Content-Encoding") or "identity").lower()
                    declared = response.headers.get("Content-Length")
            except urllib.error.HTTPError as err:
                if err.code == 404:
                    return None
                raise FetchError(f"{url}: HTTP {err.code}") from err
            except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
                if deadline.expired:
                    raise deadline.missed(url) from err
                reason = getattr(err, "reason", None) or err
                raise FetchError(f"{url}: unreachable ({reason})") from err
            if deadline.expired:
                raise deadline.missed(url)
        if declared is not None and declared.isdigit() and len(body) < int(declared):
            raise FetchError(
                f"{url}: unreachable (the body ended after {len(body)} of {declared} bytes)"
            )
        if coding == "gzip":
            return _gunzip(body, url)
        if coding != "identity":
            raise FetchError(f"{url}: unsupported Content-Encoding {coding!r}")
        if len(body) > MAX_RESOURCE:
            raise FetchError(f"{url}: larger than any tlog-tiles resource")
        return body


class _Deadline:
    """One request's deadline: when it passes, every socket the request opened is shut down.

    A socket timeout bounds each wait, not the request: a server sending one byte per second
    restarts it with every byte. Shutting the socket down from a timer wakes the blocked read
    wherever it is (the headers or the body), and ``expired`` tells the reader why it woke.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def missed(self, url: str) -> FetchError:
        return FetchError(f"{url}: unreachable (no complete answer within {self.seconds:g} s)")

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down when the deadline passes (at once if it has passed)."""
        with self._lock:
            self._sockets.append(sock)
            if not self.expired:
                return
        _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def opener(self) -> urllib.request.OpenerDirector:
        """A urllib opener whose connections (redirects included) this deadline watches."""
        deadline = self

        class Http(http.client.HTTPConnection):
            def connect(self) -> None:
                super().connect()
                deadline.watch(self.sock)

        class Https(http.client.HTTPSConnection):
            def connect(self) -> None:
                super().connect()
                deadline.watch(self.sock)

        class HttpHandler(urllib.request.HTTPHandler):
            def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
                return self.do_open(Http, req)

        class HttpsHandler(urllib.request.HTTPSHandler):
            def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
                return self.do_open(Https, req)

        return urllib.request.build_opener(HttpHandler(), HttpsHandler())


def _shut(sock: socket.socket) -> None:
    # A socket already closed has nothing left to wake.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _gunzip(body: bytes, url: str) -> bytes:
    """Inflate a gzip body, refusing more than ``MAX_RESOURCE`` bytes or a truncated stream."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, MAX_RESOURCE + 1)
    except zlib.error as err:
        raise FetchError(f"{url}: bad gzip body") from err
    if len(data) > MAX_RESOURCE or inflater.unconsumed_tail:
        raise FetchError(f"{url}: gzip body inflates beyond any tlog-tiles resource")
    if not inflater.eof or inflater.unused_data:
        raise FetchError(f"{url}: truncated or trailing gzip data")
    return data


def open_source(where: str) -> Source:
    """An ``HttpSource`` for an http(s) URL, else a ``DirSource`` for a directory."""
    if where.startswith(("http://", "https://")):
        return HttpSource(where)
    return DirSource(where)


class Prefetch(Source):
    """A source that fetches named paths ahead, in threads, and hands each out once."""

    def __init__(self, inner: Source) -> None:
        self.inner, self.name = inner, inner.name
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="saihm-mirror-fetch")
        self._ahead: dict[str, Future[bytes | None]] = {}

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        for future in self._ahead.values():
            future.cancel()
        self._pool.shutdown(wait=True)

    def warm(self, paths: Sequence[str]) -> None:
        for path in paths:
            if path not in self._ahead:
                self._ahead[path] = self._pool.submit(self.inner.get, path)

    def get(self, path: str) -> bytes | None:
        future = self._ahead.pop(path, None)
        return self.inner.get(path) if future is None else future.result()


def tile_reader(source: Source, size: int) -> ReadTile:
    """``read(level, index)`` of the hash tiles of the tree of ``size`` leaves in ``source``.

    A tile the tree of ``size`` holds in full is read as ``tile/<L>/<N>``, the one at its right
    edge as ``tile/<L>/<N>.p/<W>`` (c2sp.org/tlog-tiles); any other is None. A tile of the wrong
    length raises ``FetchError``. The nodes of every smaller tree lie in these same tiles (a
    partial tile is a prefix of the full one), so one reader serves every size up to ``size``.
    """
    if type(size) is not int or not 0 <= size < 1 << 64:
        raise MalformedInput("tree size must be an integer in [0, 2**64)")

    def read(level: int, index: int) -> bytes | None:
        full, width = tile_widths(size, level)
        if index < full:
            want, path = 256, tile_path(level, index)
        elif index == full and width:
            want, path = width, tile_path(level, index, width)
        else:
            return None
        data = source.get(path)
        if data is not None and len(data) != 32 * want:
            raise FetchError(f"{source.name}: {path} holds {len(data)} bytes, want {32 * want}")
        return data

    return read


def tile_nodes(source: Source, size: int) -> TileNodes:
    """The ``proof.FetchNodes`` over ``source``'s tiles for trees of up to ``size`` leaves."""
    return TileNodes(tile_reader(source, size))
