"""One connection lifecycle for every client: ``AsyncClient``/``Client`` of an operator and
``AsyncAdmin``/``Admin`` of the authority service.

:func:`open_target` checks what a client is given (endpoint, credential, pin, timeout, CA
file) before any connection and in one order, so every client refuses the same bad input
with the same :class:`~saihm.client.errors.ClientError`. :class:`AsyncFace` holds the
checked :class:`~saihm.client._transport.Target` and the connection pool that ``async with``
opens and :meth:`AsyncFace.aclose` closes (idempotently), and posts over it with the
transport's error mapping. :class:`SyncFace` is the synchronous face of one of them: its
coroutines run on a private loop in one daemon thread (saihm/client/_loop.py); ``with`` or
:meth:`SyncFace.close` (idempotent) closes the pool and stops the thread. Retrying refused
calls (saihm/client/_retry.py) is the operator client's own: the authority's answers are
never re-sent.
"""

from __future__ import annotations

from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Generic, Self, TypeVar
from urllib.parse import urlsplit

import aiohttp

from saihm.client._endpoint import check_auth_header, parse_pin, validate_endpoint
from saihm.client._loop import LoopThread
from saihm.client._transport import Target, make_ssl_context, new_session, post_json
from saihm.client.errors import ClientError

__all__ = ["AsyncFace", "SyncFace", "open_target"]

T = TypeVar("T")
F = TypeVar("F", bound="AsyncFace")


def open_target(
    endpoint: str,
    auth_header: str | None,
    *,
    names: tuple[str, str],
    timeout: float,
    ca_file: str | None,
    tls_pin_sha256: str | None,
    max_response_bytes: int,
    root_only: bool = False,
) -> Target:
    """The checked target of ``endpoint`` with the Authorization value ``auth_header``.

    ``names`` are the endpoint's and the credential's names as errors show them. With
    ``root_only`` the endpoint must be a root URL without a query (the authority service
    joins its paths to it). Raises a ``config`` :class:`ClientError` naming what is wrong and
    never the endpoint's secrets or the credential.
    """
    endpoint_name, auth_name = names
    url = validate_endpoint(endpoint, endpoint_name, auth_name)
    if root_only and urlsplit(url).query:
        raise ClientError(
            "the authority endpoint must be its root URL, without a query", kind="config"
        )
    auth = check_auth_header(auth_header, auth_name)
    pin = parse_pin(tls_pin_sha256)
    if not timeout > 0:
        raise ClientError("timeout must be a positive number of seconds", kind="config")
    context = make_ssl_context(ca_file) if url.startswith("https:") else None
    if pin is not None and context is None:
        raise ClientError("a certificate pin needs an https endpoint", kind="config")
    return Target(url, auth, context, pin, float(timeout), max_response_bytes)


class AsyncFace:
    """An asyncio client of one :class:`Target`. Used as ``async with`` it keeps one
    connection pool for its calls; otherwise each call opens and closes its own."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        if self._session is None:
            self._session = new_session(self._target)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool (if ``async with`` opened one)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def _post(self, payload: dict[str, Any], path: str = "") -> Any:
        """POST ``payload`` to the target (joined with ``path``) over the pool when one is
        open: the parsed 2xx JSON body, or :class:`ClientError` (saihm/client/_transport.py)."""
        return await post_json(self._target, payload, self._session, path=path)


class SyncFace(Generic[F]):
    """The synchronous face of one :class:`AsyncFace`: each call runs on a private event loop
    in one daemon thread named ``thread_name``, so it works from scripts, threads and code
    already inside an event loop. Use it as a context manager, or call :meth:`close`."""

    def __init__(self, face: F, thread_name: str) -> None:
        self._async = face
        self._thread = LoopThread(face, thread_name)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._thread.run(coro)

    def close(self) -> None:
        """Close the connection pool and stop the thread; idempotent."""
        self._thread.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
