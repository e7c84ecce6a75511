"""Fixtures for the person's page (``/me/``) in headless Chromium against a real ``saihm serve``.

The browser and the screenshot helper are the explorer's (tests/explorer/conftest.py); the
world is one holder with two sessions, a holder-wide grant the person signs in with, a second
grant an agent holds, a local vault with a consumer grant and one pending proposal, and a
hostile memory.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.explorer.conftest import ROOT, VIEWPORT, WAIT_MS, Shots, browser  # noqa: F401
from tests.support.serve import SAIHM, fetch, holder_create, post, serving

HOSTILE = (
    "<script>document.title='owned'</script><img src=x onerror=\"document.title='owned'\">"
    " \u202eevil\u202c reversed \u2066isolate\u2069"
)


def saihm(data: Path, *args: str) -> dict:
    done = subprocess.run(
        [SAIHM, *args, "--data", str(data)], capture_output=True, check=True, text=True
    )
    return json.loads(done.stdout)


class World:
    """The served data directory, its tokens and the ids the tests look for."""

    def __init__(self, tmp: Path, url: str, data: Path) -> None:
        self.tmp, self.url, self.data = tmp, url, data
        holder = holder_create(data)
        self.holder_id = holder["holderId"]
        self.session_token = holder["token"]
        self.session_id = holder["sessionId"]
        other = saihm(data, "session", "open", "--holder", self.holder_id)
        self.other_token = other["token"]
        self.plaintexts = {
            "tea": "I prefer green tea in the morning",
            "hostile": HOSTILE,
            "other": "a fact from the other session about sailing",
        }
        self.cells = {
            "tea": self.remember(self.session_token, self.plaintexts["tea"]),
            "hostile": self.remember(self.session_token, HOSTILE),
            "other": self.remember(self.other_token, self.plaintexts["other"]),
        }
        status, said = post(
            url, self.session_token, "saihm_record", {"content": "user said hello", "kind": "said"}
        )
        assert status == 200, said
        self.plaintexts["said"] = "user said hello"
        person = saihm(data, "grant", "--holder", self.holder_id, "--sessions", "all")
        self.person_token, self.person_grant = person["token"], person["grantId"]
        agent = saihm(data, "grant", "--holder", self.holder_id, "--sessions", "all")
        self.agent_token, self.agent_grant = agent["token"], agent["grantId"]
        saihm(data, "memory", "init", "--holder", self.holder_id)
        consumer = saihm(data, "memory", "grant", "cursor", "--memory", "notes", "--write")
        self.consumer_token = consumer["token"]
        self.proposal_text = "the person likes dark mode"
        body = json.dumps({"namespace": "notes", "content": {"fact": self.proposal_text}})
        status, raw = fetch(
            url + "memory/v1/store",
            data=body.encode(),
            headers={
                "Authorization": f"Bearer {self.consumer_token}",
                "Content-Type": "application/json",
            },
        )
        assert status == 200, raw
        self.proposal_id = json.loads(raw)["id"]

    def remember(self, token: str, content: str) -> str:
        status, result = post(self.url, token, "saihm_remember", {"content": content})
        assert status == 200, result
        return result["cellId"]

    def tokens(self) -> list[str]:
        return [
            self.session_token,
            self.other_token,
            self.person_token,
            self.agent_token,
            self.consumer_token,
        ]

    def server_output(self) -> str:
        return "".join(p.read_text() for p in self.tmp.glob("serve.*"))


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("me")
    data = tmp / "data"
    with serving(tmp, "--data", str(data), "--person-actions") as (_, url):
        yield World(tmp, url, data)


@pytest.fixture(scope="session")
def shots(tmp_path_factory) -> Shots:
    taken = Shots(tmp_path_factory.mktemp("me-screenshots"))
    if os.environ.get("CI") == "true":
        taken.ci = ROOT / "test-artifacts" / "me"
    return taken


@pytest.fixture
def page(browser):  # noqa: F811
    tab = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    tab.on("pageerror", lambda err: errors.append(str(err)))
    yield tab
    tab.close()
    assert errors == [], f"the page raised: {errors}"


def sign_in(page, world: World, token: str) -> None:
    """Open /me/, paste ``token`` and wait (bounded) until every view has loaded."""
    page.goto(world.url + "me/")
    page.wait_for_selector("body[data-ready=signed-out]", timeout=WAIT_MS)
    page.fill("#token", token)
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("body[data-ready=yes], body[data-ready=failed]", timeout=WAIT_MS)
