"""The storage contract's fixtures: every test runs on each driver (``lmdb``, ``postgresql``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from saihm.storage import Storage, open_storage
from tests.support.postgres import fresh_location

NS: tuple[bytes, ...] = (b"main", b"other")
CHILD = Path(__file__).with_name("_child.py")
DRIVERS = ("lmdb", "postgresql")

Opener = Callable[..., Storage]


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def location(driver: str, tmp_path: Path) -> Iterator[str]:
    """Where a fresh, empty storage of ``driver`` lives (a directory or a URL)."""
    if driver == "lmdb":
        yield str(tmp_path / "lmdb")
        return
    with fresh_location() as url:
        yield url


@pytest.fixture
def opener(location: str) -> Iterator[Opener]:
    """``opener(namespaces=NS, **options)`` opens the test's storage; all closed at the end."""
    opened: list[Storage] = []

    def open_(namespaces: Sequence[bytes] = NS, **options: object) -> Storage:
        storage = open_storage(location, namespaces, **options)  # type: ignore[arg-type]
        opened.append(storage)
        return storage

    yield open_
    for storage in reversed(opened):
        storage.close()


@pytest.fixture
def storage(opener: Opener) -> Storage:
    return opener()


def child(location: str, *args: str, **popen: object) -> subprocess.Popen[str]:
    """Start ``_child.py`` on ``location`` (passed in the environment, not on the command
    line, so a URL's password is not in the process list)."""
    env = {**os.environ, "SAIHM_CHILD_LOCATION": location}
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, str(CHILD), *args],
        env=env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )


def run_child(location: str, *args: str, timeout: float = 120) -> str:
    """Run ``_child.py`` to completion; its stdout (fails the test on a non-zero exit)."""
    proc = child(location, *args)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return out
