"""Start the real ``saihm serve`` as a subprocess and talk to it (shared by end-to-end tests)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SAIHM = str(BIN / "saihm")
READY_SECONDS = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url, *, data=None, headers=None, context=None, timeout=30):
    """(status, body bytes) of one request; HTTP errors are answers, not exceptions."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


#: What a test server is told of the semantic stage unless the test asks for the default.
LEXICAL = ("--embedding-model", "none")


def serve_args(args: tuple[str, ...], model: bool) -> list[str]:
    """``saihm serve``'s arguments for :func:`serving`: ``args`` and, unless ``model`` or
    ``args`` names a model, ``--embedding-model none``."""
    named = any(a == LEXICAL[0] or a.startswith(LEXICAL[0] + "=") for a in args)
    return [*args] if model or named else [*args, *LEXICAL]


@contextmanager
def serving(
    tmp: Path, *args: str, context=None, scheme="http", env=None, name="serve", model=False
) -> Iterator[tuple]:
    """Start ``saihm serve ARGS --port P`` in ``tmp``; yield once /log/checkpoint answers.

    The server ranks lexically (``--embedding-model none``): loading the bundled model costs
    every server start seconds of CPU and a test that does not rank by meaning does not need
    it. ``model=True`` serves as ``saihm serve`` does by default (the bundled model, unless
    ``args`` names another), for the tests of the default and of the semantic stage; ``args``
    naming ``--embedding-model`` is always passed as given.

    ``env`` adds environment variables (``SAIHM_STORE`` for a node of a PostgreSQL store);
    ``name`` names its output files ``tmp/NAME.out`` and ``tmp/NAME.err``, so several servers
    can run in one directory.
    """
    import os

    args = tuple(serve_args(args, model))
    port = free_port()
    out, err = (tmp / f"{name}.out").open("w"), (tmp / f"{name}.err").open("w")
    proc = subprocess.Popen(
        [SAIHM, "serve", *args, "--port", str(port)],
        cwd=tmp,
        stdout=out,
        stderr=err,
        env={**os.environ, **(env or {})},
    )
    url = f"{scheme}://127.0.0.1:{port}/"
    try:
        for _ in range(READY_SECONDS * 20):  # bounded poll; the wait is the poll interval
            try:
                if fetch(url + "log/checkpoint", context=context, timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            try:
                proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail(
                f"saihm serve exited {proc.returncode}: {(tmp / f'{name}.err').read_text()}"
            )
        else:
            pytest.fail("saihm serve did not answer in time")
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        out.close()
        err.close()


def holder_create(data: Path, *extra: str) -> dict:
    """``saihm holder create --data DATA EXTRA...`` (``"--store", URL`` for a PostgreSQL store)."""
    done = subprocess.run(
        [SAIHM, "holder", "create", "--data", str(data), *extra], capture_output=True, check=True
    )
    return json.loads(done.stdout)


def post(url, token, method, params, context=None):
    body = json.dumps({"method": method, "params": params}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    status, raw = fetch(url, data=body, headers=headers, context=context)
    return status, json.loads(raw)


def checkpoint(url, context=None):
    from saihm.translog.checkpoint import verify_checkpoint

    _, keys = fetch(url + "log/v1/keys", context=context)
    _, note = fetch(url + "log/checkpoint", context=context)
    return verify_checkpoint(note, [k["vkey"] for k in json.loads(keys)["checkpointKeys"]])


def until(condition: Callable[[], object], what: str, seconds: float) -> None:
    """Poll ``condition`` until it is true; fail the test naming ``what`` after ``seconds``
    (a bounded wait for another process, never a sleep that hopes)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


@contextmanager
def authority_serving(
    tmp: Path,
    data: Path,
    authority_dir: Path,
    *args: str,
    name: str = "authority",
    context=None,
    scheme: str = "http",
) -> Iterator[tuple]:
    """Start ``saihm authority serve`` for ``data`` with the key directory ``authority_dir``
    on a free port; yield ``(process, url, credential)`` once ``/v1/health`` answers (over
    ``scheme``, checked with ``context`` for https). Its output goes to ``tmp/NAME.out`` and
    ``tmp/NAME.err``."""
    port = free_port()
    out, err = (tmp / f"{name}.out").open("w"), (tmp / f"{name}.err").open("w")
    proc = subprocess.Popen(
        [
            SAIHM,
            "authority",
            "serve",
            "--data",
            str(data),
            "--authority-dir",
            str(authority_dir),
            *args,
            "--listen",
            f"127.0.0.1:{port}",
        ],
        cwd=tmp,
        stdout=out,
        stderr=err,
    )
    url = f"{scheme}://127.0.0.1:{port}/"

    def ready() -> bool:
        if proc.poll() is not None:
            said = (tmp / f"{name}.err").read_text()
            pytest.fail(f"saihm authority serve exited {proc.returncode}: {said}")
        try:
            return fetch(url + "v1/health", context=context, timeout=2)[0] == 200
        except OSError:
            return False

    try:
        until(ready, "saihm authority serve to answer", READY_SECONDS)
        credential = (authority_dir / "admin.credential").read_text().strip()
        yield proc, url, credential
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        out.close()
        err.close()
