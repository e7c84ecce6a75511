"""The private event loop behind a synchronous face (:class:`~saihm.client.Client`,
:class:`~saihm.client.Admin`): one daemon thread, started on the first call, so a synchronous
call works from scripts, threads and code already inside an event loop."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class _AsyncFace(Protocol):
    async def __aenter__(self) -> Any: ...

    async def aclose(self) -> None: ...


def _shutdown(face: _AsyncFace, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Close ``face``'s pool on ``loop``, then stop the loop and its thread."""
    if loop.is_running():
        asyncio.run_coroutine_threadsafe(face.aclose(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


class LoopThread:
    """Runs the coroutines of one async face on a private loop in a thread named ``name``.
    Never closed, it is closed when collected or at exit."""

    def __init__(self, face: _AsyncFace, name: str) -> None:
        self._face = face
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop (started, and the face entered, on first use)."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                asyncio.run_coroutine_threadsafe(self._face.__aenter__(), loop).result()
                self._finalizer = weakref.finalize(self, _shutdown, self._face, loop, thread)
                self._loop = loop
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def close(self) -> None:
        """Close the face's connection pool and stop the thread; idempotent."""
        with self._lock:
            finalizer, self._finalizer, self._loop = self._finalizer, None, None
        if finalizer is not None:
            finalizer()
