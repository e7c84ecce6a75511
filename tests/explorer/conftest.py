"""Fixtures for the explorer's browser tests: headless Chromium, a populated ``saihm serve`` and
a proxy in front of it that can lie (a flipped proof hash, an old or forged checkpoint).

The browser is Debian's Chromium driven by Playwright (never ``playwright install``). Where no
browser is installed the tests skip with the reason, except under ``CI=true``, where a missing
browser is a failure: ``.ci/run`` installs it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.explorer.populate import populate
from tests.support.serve import fetch, serving

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: How long the page may take to load and check (a bounded wait on a real condition).
WAIT_MS = 30_000
VIEWPORT = {"width": 1100, "height": 900}


def chromium_path() -> str | None:
    return (
        os.environ.get("SAIHM_CHROMIUM")
        or shutil.which("chromium")
        or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    )


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason} (.ci/run installs chromium)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Chromium for one test module. Not for the session: Playwright's sync API keeps an
    asyncio loop running on the main thread while it is open, which the async tests of other
    directories cannot share."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
    executable = chromium_path()
    if executable is None:
        _unavailable("no Chromium: apt-get install chromium (or set SAIHM_CHROMIUM)")
    with sync_playwright() as playwright:
        # Playwright starts Chromium with a new empty --user-data-dir of its own, and every
        # test gets a fresh context (no cookies, storage or cache from another test).
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_FLAGS
        )
        yield browser
        browser.close()


class Shots:
    """Screenshots kept as test artifacts: in the tmp dir, and in test-artifacts/ on CI."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.ci = ROOT / "test-artifacts" / "explorer" if os.environ.get("CI") == "true" else None

    def take(self, page, name: str, selector: str | None = None) -> Path:
        path = self.where / f"{name}.png"
        if selector is None:
            page.screenshot(path=str(path), full_page=True)
        else:
            page.locator(selector).screenshot(path=str(path))
        assert path.stat().st_size > 1000
        if self.ci is not None:
            self.ci.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, self.ci / path.name)
        return path


@pytest.fixture(scope="session")
def shots(tmp_path_factory) -> Shots:
    return Shots(tmp_path_factory.mktemp("screenshots"))


class Proxy:
    """An aiohttp proxy in its own thread in front of the real server; ``lies`` says how it
    lies: ``"inclusion"`` flips a byte of the first hash of every inclusion proof,
    ``"checkpoint"`` serves ``self.note`` instead of the log's checkpoint, ``"receipt-json"``
    changes the JSON form of listed receipts but not their CBOR."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.lies: set[str] = set()
        self.note = b""
        self.loop = asyncio.new_event_loop()
        self.url = ""
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        assert ready.wait(30), "the proxy did not start"

    def _run(self, ready: threading.Event) -> None:
        from aiohttp import ClientSession, web

        async def handle(request: web.Request) -> web.Response:
            path = request.rel_url.path_qs
            if path == "/log/checkpoint" and "checkpoint" in self.lies:
                return web.Response(body=self.note, content_type="text/plain")
            headers = {k: v for k, v in request.headers.items() if k.lower() == "accept"}
            async with self.session.get(self.upstream.rstrip("/") + path, headers=headers) as up:
                body = await up.read()
                kind = up.headers.get("Content-Type", "application/octet-stream")
                keep = {
                    k: v
                    for k, v in up.headers.items()
                    if k.lower() in ("content-type", "content-security-policy", "cache-control")
                }
                if path.startswith("/log/v1/receipts?") and "receipt-json" in self.lies:
                    answer = json.loads(body)
                    for entry in answer["receipts"]:
                        entry["receipt"]["timestamp"] = "1"  # the CBOR leaf stays as logged
                    body = json.dumps(answer).encode()
                if path.startswith("/log/v1/proof/inclusion") and "inclusion" in self.lies:
                    answer = json.loads(body)
                    first = bytearray.fromhex(answer["proof"][0])
                    first[0] ^= 0x01
                    answer["proof"][0] = first.hex()
                    body = json.dumps(answer).encode()
                return web.Response(
                    body=body, status=up.status, headers=keep | {"Content-Type": kind}
                )

        async def main() -> None:
            self.session = ClientSession()
            app = web.Application()
            app.router.add_get("/{tail:.*}", handle)
            self.runner = web.AppRunner(app)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}/"
            ready.set()

        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(main())
        self.loop.run_forever()

    def close(self) -> None:
        async def stop() -> None:
            await self.session.close()
            await self.runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


class Log:
    """The served, populated log: its URL, data directory, ids, and a lying proxy."""

    def __init__(self, url: str, data: Path, ids: dict, proxy: Proxy) -> None:
        self.url, self.data, self.ids, self.proxy = url, data, ids, proxy

    def checkpoint_note(self) -> bytes:
        status, note = fetch(self.url + "log/checkpoint")
        assert status == 200
        return note

    def receipts(self, query: str) -> list[dict]:
        status, body = fetch(self.url + "log/v1/receipts?" + query)
        assert status == 200
        return json.loads(body)["receipts"]

    def remember(self, content: str) -> dict:
        from tests.support.serve import post

        status, result = post(
            self.url, self.ids["holders"][0]["token"], "saihm_remember", {"content": content}
        )
        assert status == 200, result
        return result

    def forge_checkpoint(self, size: int, root: bytes, extra_line: str | None = None) -> bytes:
        """A checkpoint for (size, root) signed with the log's real Ed25519 key: a log that
        lies with its own key (a fork), which only a consistency check can catch."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        (line,) = (self.data / "log-keys" / "checkpoint-ed25519.key").read_text().split()
        _, _, name, key_id, material = line.split("+", 4)
        seed = base64.b64decode(material)[1:]
        key = Ed25519PrivateKey.from_private_bytes(seed)
        text = f"{name}\n{size}\n{base64.b64encode(root).decode()}\n".encode()
        blob = bytes.fromhex(key_id) + key.sign(text)
        note = text + b"\n" + f"\u2014 {name} {base64.b64encode(blob).decode()}\n".encode()
        if extra_line is not None:
            note += extra_line.encode() + b"\n"
        return note


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Iterator[Log]:
    tmp = tmp_path_factory.mktemp("explorer-log")
    data = tmp / "data"
    with serving(tmp, "--data", str(data)) as (_, url):
        ids = populate(url, data)
        proxy = Proxy(url)
        try:
            yield Log(url, data, ids, proxy)
        finally:
            proxy.close()


@pytest.fixture
def page(browser, log):
    """A fresh tab; the proxy tells the truth unless a test says otherwise."""
    log.proxy.lies.clear()
    tab = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    tab.on("pageerror", lambda err: errors.append(str(err)))
    yield tab
    tab.close()
    assert errors == [], f"the page raised: {errors}"


def open_explorer(page, base: str) -> None:
    """Load the explorer and wait (bounded) until its script has finished starting."""
    page.goto(base + "explorer/")
    page.wait_for_selector("body[data-ready=yes], body[data-ready=failed]", timeout=WAIT_MS)
