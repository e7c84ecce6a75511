"""Progress bars for long runs: rich, on stderr, only when stderr is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType

__all__ = ["Progress", "progress"]

Advance = Callable[[int], None]


class Progress(AbstractContextManager):
    """A no-op progress reporter; ``task(name, total)`` returns an ``advance(n)`` callable."""

    def task(self, name: str, total: int) -> Advance:
        """Start a task; return the function that advances it."""
        return lambda n: None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


class _Rich(Progress):
    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(console=Console(stderr=True), transient=True)

    def __enter__(self) -> _Rich:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def task(self, name: str, total: int) -> Advance:
        task_id = self._bar.add_task(name, total=total)
        return lambda n: self._bar.advance(task_id, n)


def progress(enabled: bool = True) -> Progress:
    """A rich progress display on stderr if ``enabled`` and stderr is a TTY, else a no-op."""
    if enabled and sys.stderr.isatty():
        return _Rich()
    return Progress()
