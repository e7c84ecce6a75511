"""Fixtures for the person's page (``/me/``) in headless Chromium against a real ``saihm serve``.

The browser and the screenshot helper are the explorer's (tests/explorer/conftest.py); the
world is a default ``saihm serve`` beside ``saihm authority serve`` (the operator at
``http://localhost:PORT/``, where passkeys bind), one holder with two sessions, two holder-wide
grants agents hold, a local vault with a consumer grant and one pending proposal, a hostile
memory, and the person enrolled from a person link with a software authenticator
(tests/me/authenticator.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.explorer.conftest import ROOT, VIEWPORT, WAIT_MS, Shots, browser  # noqa: F401
from tests.me.authenticator import Authenticator
from tests.support.serve import SAIHM, authority_serving, fetch, holder_create, post, serving

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

    def __init__(self, tmp: Path, url: str, data: Path, admin_url: str, credential: str) -> None:
        self.tmp, self.url, self.data = tmp, url, data
        self.admin_url, self.credential = admin_url, credential
        #: Where the person's page is: a host name, since a passkey binds to one.
        self.page_url = url.replace("127.0.0.1", "localhost")
        self.origin = self.page_url.rstrip("/")
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
        self.helper_token, self.person_grant = person["token"], person["grantId"]
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
        self.authenticator = Authenticator(self.origin)
        self.person_token = self.enrol(self.authenticator)

    def person_link(self, holder_id: str | None = None) -> str:
        """A one-time link from the authority service, as an app's back end gets one."""
        from saihm.client import Admin

        with Admin(self.admin_url, self.credential) as admin:
            return admin.person_link(holder_id or self.holder_id).url

    def ceremony(self, path: str, body: dict) -> dict:
        status, raw = fetch(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Origin": self.origin, "Content-Type": "application/json"},
        )
        assert status == 200, raw
        return json.loads(raw)

    def enrol(self, authenticator: Authenticator) -> str:
        """Enrol a passkey from a fresh person link; the person token it signs in with."""
        code = self.person_link().split("#enrol=", 1)[1]
        options = self.ceremony("me/v1/enrol/options", {"link": code})
        credential = authenticator.create(options["publicKey"])
        done = self.ceremony(
            "me/v1/enrol", {"ceremonyId": options["ceremonyId"], "credential": credential}
        )
        return done["personToken"]

    def remember(self, token: str, content: str) -> str:
        status, result = post(self.url, token, "saihm_remember", {"content": content})
        assert status == 200, result
        return result["cellId"]

    def tokens(self) -> list[str]:
        return [
            self.session_token,
            self.other_token,
            self.person_token,
            self.helper_token,
            self.agent_token,
            self.consumer_token,
        ]

    def server_output(self) -> str:
        files = [*self.tmp.glob("serve.*"), *self.tmp.glob("authority.*")]
        return "".join(p.read_text() for p in files)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("me")
    data = tmp / "data"
    with serving(tmp, "--data", str(data)) as (_, url):
        operator_url = url.replace("127.0.0.1", "localhost")
        with authority_serving(tmp, data, tmp / "authority", "--operator-url", operator_url) as (
            _,
            admin_url,
            credential,
        ):
            yield World(tmp, url, data, admin_url, credential)


@pytest.fixture(scope="session")
def shots(tmp_path_factory) -> Shots:
    taken = Shots(tmp_path_factory.mktemp("me-screenshots"))
    if os.environ.get("CI") == "true":
        taken.ci = ROOT / "test-artifacts" / "me"
    return taken


@pytest.fixture
def page(browser):  # noqa: F811
    """A fresh tab with a virtual platform authenticator (the DevTools WebAuthn domain):
    resident keys, user verification that succeeds, presence simulated."""
    tab = browser.new_page(viewport=VIEWPORT)
    add_authenticator(tab)
    errors: list[str] = []
    tab.on("pageerror", lambda err: errors.append(str(err)))
    yield tab
    tab.close()
    assert errors == [], f"the page raised: {errors}"


def add_authenticator(tab) -> object:
    cdp = tab.context.new_cdp_session(tab)
    cdp.send("WebAuthn.enable")
    cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )
    return cdp


def _ready(page) -> None:
    page.wait_for_selector("body[data-ready=yes], body[data-ready=failed]", timeout=WAIT_MS)


def enrol(page, world: World, holder_id: str | None = None) -> None:
    """Open a fresh person link, create the passkey, wait (bounded) until every view loaded."""
    page.goto("about:blank")  # a new document, not a fragment change of the open one
    page.goto(world.person_link(holder_id))
    page.wait_for_selector("body[data-ready=signed-out]", timeout=WAIT_MS)
    page.click("#enrol")
    _ready(page)


def sign_in(page, world: World) -> None:
    """Open /me/ and sign in with the passkey the tab's authenticator holds."""
    page.goto(world.page_url + "me/")
    page.wait_for_selector("body[data-ready=signed-out]", timeout=WAIT_MS)
    page.click("#signin")
    _ready(page)
