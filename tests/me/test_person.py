"""The person's passkey, sign-in and actions (``/me/v1``), attacks first.

An in-process operator over HTTP (pytest-aiohttp) and a software authenticator
(tests/me/authenticator.py) that makes real ES256 attestations and assertions, so every check
of py_webauthn runs on real bytes."""

from __future__ import annotations

import json
import secrets

import pytest

from saihm.authority import Authority
from saihm.authority.person import PERSON_TOKEN_PREFIX, PersonState
from saihm.events import CapabilityScope
from saihm.operator import Operator
from saihm.provider.models import MemoryStore
from saihm.provider.vault import LocalVault
from tests.me.authenticator import Authenticator
from tests.support.world import authority as authority
from tests.support.world import config as config
from tests.support.world import operator as operator

ORIGIN = "http://localhost:8080"
OPERATOR_URL = ORIGIN + "/"
EVIL = "https://evil.example"


class Person:
    """One holder with its agents' tokens of every kind and a vault with a pending proposal."""

    def __init__(self, operator: Operator, authority: Authority, *, vault: bool = False) -> None:
        self.operator = operator
        self.holder_id = operator.admin.create_holder()
        self.session_id = secrets.token_bytes(32)
        self.session_token = authority.issue(
            self.holder_id, self.session_id, CapabilityScope(), 3600
        ).to_token()
        self.grant_id, self.grant_token = self._grant(authority, None)
        self.narrow_id, self.narrow_token = self._grant(authority, ["weather"])
        self.consumer_token: str | None = None
        self.proposal_id: str | None = None
        if vault:
            found, _ = LocalVault.init(operator, authority, self.holder_id)
            _, token = found.grant("cursor", ["notes"], "readwrite")
            assert token is not None
            self.consumer_token = token
            ref = found.for_consumer(token).store(
                MemoryStore(namespace="notes", content={"fact": "likes dark mode"})
            )
            self.proposal_id = ref.id

    def _grant(self, authority: Authority, namespaces: list[str] | None) -> tuple[str, str]:
        import time

        grant_id, _ = self.operator.admin.grant(self.holder_id, namespaces, int(time.time()) + 3600)
        scope = CapabilityScope(
            sessions="all",
            namespaces=None if namespaces is None else tuple(namespaces),
            grant_id=grant_id,
        )
        cap = authority.issue(self.holder_id, secrets.token_bytes(32), scope, 3600)
        return grant_id.hex(), cap.to_token()

    def agent_tokens(self) -> dict[str, str]:
        tokens = {
            "session": self.session_token,
            "holder-wide grant": self.grant_token,
            "narrowed grant": self.narrow_token,
        }
        if self.consumer_token is not None:
            tokens["consumer grant"] = self.consumer_token
        return tokens


@pytest.fixture
async def client(aiohttp_client, operator):
    from saihm.http.app import create_app

    return await aiohttp_client(create_app(operator))


@pytest.fixture
def state(operator) -> PersonState:
    return PersonState(operator.store)


async def post(client, path, body=None, token=None, origin=ORIGIN):
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if origin is not None:
        headers["Origin"] = origin
    async with client.post(path, json={} if body is None else body, headers=headers) as resp:
        return resp.status, await resp.json()


async def get(client, path, token, origin=None):
    headers = {"Authorization": f"Bearer {token}"}
    if origin is not None:
        headers["Origin"] = origin
    async with client.get(path, headers=headers) as resp:
        return resp.status, await resp.json()


def link_code(url: str) -> str:
    assert url.startswith(ORIGIN + "/me/#enrol=")
    return url.split("#enrol=", 1)[1]


async def enrol(client, state, holder_id, auth: Authenticator) -> str:
    link = state.mint_link(holder_id, OPERATOR_URL)
    status, options = await post(client, "/me/v1/enrol/options", {"link": link_code(link["url"])})
    assert status == 200, options
    credential = auth.create(options["publicKey"])
    status, done = await post(
        client, "/me/v1/enrol", {"ceremonyId": options["ceremonyId"], "credential": credential}
    )
    assert status == 200, done
    return done["personToken"]


async def sign_in(client, auth: Authenticator, **kwargs) -> tuple[int, dict]:
    status, options = await post(client, "/me/v1/signin/options")
    assert status == 200, options
    credential = auth.get(options["publicKey"], **kwargs)
    return await post(
        client, "/me/v1/signin", {"ceremonyId": options["ceremonyId"], "credential": credential}
    )


async def call(client, token, method, params=None, origin=None):
    return await post(
        client, "/me/v1/call", {"method": method, "params": params or {}}, token, origin
    )


# -- enrolment and sign-in -------------------------------------------------------------------


async def test_a_link_enrols_a_passkey_and_the_passkey_signs_in(client, operator, authority, state):
    person = Person(operator, authority)
    auth = Authenticator(ORIGIN)
    token = await enrol(client, state, person.holder_id, auth)
    assert token.startswith(PERSON_TOKEN_PREFIX)
    status, signed = await sign_in(client, auth)
    assert status == 200, signed
    assert signed["holderId"] == person.holder_id.hex()
    assert signed["expiresAt"] - state.now() <= 12 * 3600
    status, result = await call(client, signed["personToken"], "saihm_status")
    assert status == 200 and result["agentIdHashHex"] == person.holder_id.hex()


async def test_the_link_code_rides_in_the_fragment_only(state, operator, authority):
    person = Person(operator, authority)
    link = state.mint_link(person.holder_id, OPERATOR_URL)
    before, _, fragment = link["url"].partition("#")
    assert before == ORIGIN + "/me/" and fragment.startswith("enrol=")
    assert link["expiresAt"] - state.now() <= 86_400


async def test_a_used_link_is_refused(client, operator, authority, state):
    person = Person(operator, authority)
    link = state.mint_link(person.holder_id, OPERATOR_URL)
    code = link_code(link["url"])
    auth = Authenticator(ORIGIN)
    status, options = await post(client, "/me/v1/enrol/options", {"link": code})
    status, _ = await post(
        client,
        "/me/v1/enrol",
        {"ceremonyId": options["ceremonyId"], "credential": auth.create(options["publicKey"])},
    )
    assert status == 200
    assert await post(client, "/me/v1/enrol/options", {"link": code}) == (
        401,
        {"error": "link_refused"},
    )


async def test_a_link_used_by_two_ceremonies_enrols_once(client, operator, authority, state):
    person = Person(operator, authority)
    code = link_code(state.mint_link(person.holder_id, OPERATOR_URL)["url"])
    auth = Authenticator(ORIGIN)
    first = (await post(client, "/me/v1/enrol/options", {"link": code}))[1]
    second = (await post(client, "/me/v1/enrol/options", {"link": code}))[1]
    one = {"ceremonyId": first["ceremonyId"], "credential": auth.create(first["publicKey"])}
    two = {"ceremonyId": second["ceremonyId"], "credential": auth.create(second["publicKey"])}
    assert (await post(client, "/me/v1/enrol", one))[0] == 200
    assert await post(client, "/me/v1/enrol", two) == (401, {"error": "link_refused"})
    assert len(state.passkeys(person.holder_id)) == 1


async def test_an_expired_link_is_refused(client, operator, authority):
    person = Person(operator, authority)
    clock = [float(operator.store.clock())]
    minted = PersonState(operator.store, clock=lambda: clock[0])
    code = link_code(minted.mint_link(person.holder_id, OPERATOR_URL, ttl=60)["url"])
    assert (await post(client, "/me/v1/enrol/options", {"link": code}))[0] == 200
    # the same record, read by a server whose clock is past the link's expiry
    clock[0] += 61
    from saihm.errors import Unauthenticated

    with pytest.raises(Unauthenticated):
        minted.registration_options(code, ORIGIN)


async def test_a_link_for_an_unknown_holder_is_not_minted(state):
    from saihm.errors import NotFound

    with pytest.raises(NotFound) as err:
        state.mint_link(secrets.token_bytes(32), OPERATOR_URL)
    assert err.value.code == "holder_not_found"


async def test_a_wrong_or_forged_code_is_refused(client, operator, authority, state):
    person = Person(operator, authority)
    code = link_code(state.mint_link(person.holder_id, OPERATOR_URL)["url"])
    link_id = code.split(".")[0]
    for bad in (link_id + ".AAAA", "00" * 16 + "." + code.split(".")[1], "x", 5, "." * 300):
        assert await post(client, "/me/v1/enrol/options", {"link": bad}) == (
            401,
            {"error": "link_refused"},
        ), bad


async def test_user_verification_is_required(client, operator, authority, state):
    person = Person(operator, authority)
    code = link_code(state.mint_link(person.holder_id, OPERATOR_URL)["url"])
    auth = Authenticator(ORIGIN)
    _, options = await post(client, "/me/v1/enrol/options", {"link": code})
    credential = auth.create(options["publicKey"], uv=False)
    status, answer = await post(
        client, "/me/v1/enrol", {"ceremonyId": options["ceremonyId"], "credential": credential}
    )
    assert (status, answer) == (401, {"error": "passkey_refused"})
    assert state.passkeys(person.holder_id) == []
    await enrol(client, state, person.holder_id, auth)
    assert (await sign_in(client, auth, uv=False))[0] == 401


# -- attacks on sign-in ------------------------------------------------------------------------


async def test_a_replayed_assertion_is_refused(client, operator, authority, state):
    person = Person(operator, authority)
    auth = Authenticator(ORIGIN)
    await enrol(client, state, person.holder_id, auth)
    _, options = await post(client, "/me/v1/signin/options")
    assertion = auth.get(options["publicKey"])
    body = {"ceremonyId": options["ceremonyId"], "credential": assertion}
    assert (await post(client, "/me/v1/signin", body))[0] == 200
    # the same ceremony again: refused (its counter no longer grows)
    assert (await post(client, "/me/v1/signin", body))[0] == 401
    # the same assertion in a fresh ceremony: it signs another challenge
    _, fresh = await post(client, "/me/v1/signin/options")
    replay = {"ceremonyId": fresh["ceremonyId"], "credential": assertion}
    assert await post(client, "/me/v1/signin", replay) == (401, {"error": "passkey_refused"})


async def test_a_replay_is_refused_where_the_counter_cannot_tell(
    client, operator, authority, state
):
    """Many platform passkeys always send a zero counter: the spent challenge refuses the
    replay, and a forged or expired ceremony id is refused before any check."""
    person = Person(operator, authority)
    auth = Authenticator(ORIGIN)
    await enrol(client, state, person.holder_id, auth)
    _, options = await post(client, "/me/v1/signin/options")
    body = {
        "ceremonyId": options["ceremonyId"],
        "credential": auth.get(options["publicKey"], counter=0),
    }
    first, second = (
        await post(client, "/me/v1/signin", body),
        await post(client, "/me/v1/signin", body),
    )
    assert first[0] == 200
    assert second == (401, {"error": "ceremony_refused"})
    payload, _, tag = options["ceremonyId"].partition(".")
    for forged in (payload + "." + tag[:-2] + "AA", "x", payload, 5):
        _, fresh = await post(client, "/me/v1/signin/options")
        body = {"ceremonyId": forged, "credential": auth.get(fresh["publicKey"], counter=0)}
        assert await post(client, "/me/v1/signin", body) == (401, {"error": "ceremony_refused"})
    late = PersonState(operator.store, clock=lambda: state.now() + 301)
    _, fresh = await post(client, "/me/v1/signin/options")
    from saihm.errors import Unauthenticated

    with pytest.raises(Unauthenticated) as err:
        late.authenticate(fresh["ceremonyId"], auth.get(fresh["publicKey"], counter=0))
    assert err.value.code == "ceremony_refused"


async def test_a_counter_that_does_not_grow_is_refused(client, operator, authority, state):
    person = Person(operator, authority)
    auth = Authenticator(ORIGIN)
    await enrol(client, state, person.holder_id, auth)
    assert (await sign_in(client, auth, counter=5))[0] == 200
    assert await sign_in(client, auth, counter=5) == (401, {"error": "passkey_refused"})
    assert await sign_in(client, auth, counter=3) == (401, {"error": "passkey_refused"})
    assert (await sign_in(client, auth, counter=6))[0] == 200


async def test_a_passkey_signs_in_only_as_its_own_holder(client, operator, authority, state):
    alice, bob = Person(operator, authority), Person(operator, authority)
    alice_key, bob_key = Authenticator(ORIGIN), Authenticator(ORIGIN)
    await enrol(client, state, alice.holder_id, alice_key)
    await enrol(client, state, bob.holder_id, bob_key)
    status, bob_cell = await call(
        client,
        (await sign_in(client, bob_key))[1]["personToken"],
        "saihm_remember",
        {"content": "bob's secret"},
    )
    assert status == 200
    status, signed = await sign_in(client, alice_key)
    assert signed["holderId"] == alice.holder_id.hex()
    token = signed["personToken"]
    # Alice's person token reaches none of Bob's memory, grants or cells
    _, seen = await call(client, token, "saihm_recall", {"query": "secret"})
    assert all(item["plaintext"] != "bob's secret" for item in seen)
    assert await post(client, "/me/v1/grants/revoke", {"grantId": bob.grant_id}, token) == (
        404,
        {"error": "grant_not_found"},
    )
    status, answer = await call(client, token, "saihm_forget", {"id": bob_cell["cellId"]})
    assert (status, answer["error"]) == (403, "not_holder")
    # Bob's passkey presented for Alice's link enrols nothing new for Alice
    code = link_code(state.mint_link(alice.holder_id, OPERATOR_URL)["url"])
    _, options = await post(client, "/me/v1/enrol/options", {"link": code})
    stolen = bob_key.create(options["publicKey"], reuse=bob_key.passkeys[0])
    status, _ = await post(
        client, "/me/v1/enrol", {"ceremonyId": options["ceremonyId"], "credential": stolen}
    )
    assert status == 401
    assert len(state.passkeys(alice.holder_id)) == 1


async def test_a_person_token_dies_with_its_passkey(client, operator, authority, state):
    person = Person(operator, authority)
    auth = Authenticator(ORIGIN)
    first = await enrol(client, state, person.holder_id, auth)
    second_key = Authenticator(ORIGIN)
    second = await enrol(client, state, person.holder_id, second_key)
    status, listed = await get(client, "/me/v1/passkeys", second)
    assert status == 200 and len(listed["passkeys"]) == 2
    mine = next(k for k in listed["passkeys"] if not k["current"])["passkeyId"]
    assert (await post(client, "/me/v1/passkeys/remove", {"passkeyId": mine}, second))[0] == 200
    assert (await call(client, first, "saihm_status"))[0] == 401
    assert (await sign_in(client, auth))[0] == 401
    assert (await call(client, second, "saihm_status"))[0] == 200
    # lost every passkey: a new link enrols a new one
    current = (await get(client, "/me/v1/passkeys", second))[1]["passkeys"][0]["passkeyId"]
    await post(client, "/me/v1/passkeys/remove", {"passkeyId": current}, second)
    assert (await call(client, second, "saihm_status"))[0] == 401
    fresh = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    assert (await call(client, fresh, "saihm_status"))[0] == 200


async def test_signing_out_ends_the_token(client, operator, authority, state):
    person = Person(operator, authority)
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    assert (await post(client, "/me/v1/signout", {}, token))[0] == 200
    assert (await call(client, token, "saihm_status"))[0] == 401


async def test_a_cross_origin_request_is_refused(client, operator, authority, state):
    person = Person(operator, authority)
    code = link_code(state.mint_link(person.holder_id, OPERATOR_URL)["url"])
    assert await post(client, "/me/v1/enrol/options", {"link": code}, origin=EVIL) == (
        403,
        {"error": "bad_origin"},
    )
    auth = Authenticator(ORIGIN)
    token = await enrol(client, state, person.holder_id, auth)
    # a page on another origin holding the token
    assert await call(client, token, "saihm_status", origin=EVIL) == (403, {"error": "bad_origin"})
    status, _ = await get(client, "/me/v1/pending", token, origin=EVIL)
    assert status == 403
    # an assertion made on another origin (a phishing page relaying the ceremony)
    _, options = await post(client, "/me/v1/signin/options")
    relayed = auth.get(options["publicKey"], origin=EVIL)
    body = {"ceremonyId": options["ceremonyId"], "credential": relayed}
    assert await post(client, "/me/v1/signin", body) == (401, {"error": "passkey_refused"})
    # sign-in options asked from another origin bind to that origin's RP, not this passkey's
    status, evil_options = await post(client, "/me/v1/signin/options", origin=EVIL)
    assert status == 200 and evil_options["publicKey"]["rpId"] == "evil.example"
    body = {
        "ceremonyId": evil_options["ceremonyId"],
        "credential": auth.get(evil_options["publicKey"], origin=EVIL),
    }
    assert await post(client, "/me/v1/signin", body) == (401, {"error": "passkey_refused"})
    assert (await post(client, "/me/v1/signin/options", origin=None))[0] == 400


# -- no agent token acts for the person --------------------------------------------------------


ACTIONS = (
    ("POST", "/me/v1/call", {"method": "saihm_status", "params": {}}),
    ("POST", "/me/v1/call", {"method": "saihm_remember", "params": {"content": "x"}}),
    ("GET", "/me/v1/grants", None),
    ("POST", "/me/v1/grants/name", {"grantId": "00" * 32, "name": "x"}),
    ("POST", "/me/v1/grants/revoke", {"grantId": "00" * 32}),
    ("GET", "/me/v1/pending", None),
    ("POST", "/me/v1/pending/accept", {"id": "00" * 32}),
    ("POST", "/me/v1/pending/reject", {"id": "00" * 32}),
    ("GET", "/me/v1/passkeys", None),
    ("GET", "/me/v1/export", None),
    ("GET", "/me/v1/history?cellId=" + "00" * 32, None),
    ("POST", "/me/v1/passkeys/remove", {"passkeyId": "00" * 32}),
    ("POST", "/me/v1/signout", {}),
)


async def test_every_action_refuses_every_agent_token(client, operator, authority, state):
    person = Person(operator, authority, vault=True)
    size = _size(operator)
    real = {
        "/me/v1/grants/revoke": {"grantId": person.grant_id},
        "/me/v1/grants/name": {"grantId": person.grant_id, "name": "mine"},
        "/me/v1/pending/accept": {"id": person.proposal_id},
        "/me/v1/pending/reject": {"id": person.proposal_id},
    }
    for kind, token in person.agent_tokens().items():
        for method, path, body in ACTIONS:
            body = real.get(path, body)
            if method == "GET":
                answer = await get(client, path, token)
            else:
                answer = await post(client, path, body, token)
            assert answer == (403, {"error": "not_permitted"}), (kind, path, answer)
    assert _size(operator) == size  # nothing was logged
    assert state.grant_names(person.holder_id) == {}
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    _, pending = await get(client, "/me/v1/pending", token)
    assert [p["id"] for p in pending["pending"]] == [person.proposal_id]


async def test_the_narrowed_grant_reads_neither_pending_nor_grants(client, operator, authority):
    """Issue 32 item 2: a `--sessions all --namespaces weather` token is refused by
    /me/v1/pending and /me/v1/grants (it read every namespace's proposals before)."""
    person = Person(operator, authority, vault=True)
    for path in ("/me/v1/pending", "/me/v1/grants"):
        assert await get(client, path, person.narrow_token) == (403, {"error": "not_permitted"})


async def test_a_bad_token_is_401_and_a_person_token_is_no_capability(
    client, operator, authority, state
):
    person = Person(operator, authority)
    assert (await get(client, "/me/v1/pending", "not-a-token"))[0] == 401
    assert (await get(client, "/me/v1/pending", PERSON_TOKEN_PREFIX + "A" * 43))[0] == 401
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    headers = {"Authorization": f"Bearer {token}"}
    async with client.post(
        "/", json={"method": "saihm_status", "params": {}}, headers=headers
    ) as r:
        assert r.status == 401


# -- the person's actions, each a receipt ------------------------------------------------------


def _size(operator: Operator) -> int:
    with operator.store.read_txn() as txn:
        return operator.store.tree.size(txn)


def _operations(operator: Operator, start: int) -> list[str]:
    from saihm.events import Receipt

    out = []
    with operator.store.read_txn() as txn:
        for index in range(start, operator.store.tree.size(txn)):
            leaf = operator.store.tree.leaf(txn, index)
            out.append(Receipt.from_cbor(leaf).operation.value)
    return out


async def test_the_person_adds_edits_forgets_names_revokes_and_decides(
    client, operator, authority, state
):
    person = Person(operator, authority, vault=True)
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    status, agent_cell = (
        200,
        operator.memory.remember(
            operator.store.authenticate(person.session_token), "lives in Oslo"
        ),
    )
    start = _size(operator)
    status, added = await call(client, token, "saihm_remember", {"content": "likes tea"})
    assert status == 200
    status, edited = await call(
        client,
        token,
        "saihm_remember",
        {"content": "moved to Bergen", "supersedes": agent_cell.cell_id.hex()},
    )
    assert status == 200, edited
    status, forgotten = await call(client, token, "saihm_forget", {"id": added["cellId"]})
    assert status == 200 and forgotten["success"] is True
    status, _named = await post(
        client, "/me/v1/grants/name", {"grantId": person.grant_id, "name": "Travel agent"}, token
    )
    assert status == 200
    _, grants = await get(client, "/me/v1/grants", token)
    assert grants["names"] == {person.grant_id: "Travel agent"}
    status, _ = await post(client, "/me/v1/grants/revoke", {"grantId": person.grant_id}, token)
    assert status == 200
    status, _ = await post(client, "/me/v1/pending/accept", {"id": person.proposal_id}, token)
    assert status == 200
    assert _operations(operator, start) == [
        "REMEMBER",
        "REMEMBER",
        "FORGET",
        "FORGET",
        "UNGRANT",
        "REMEMBER",
    ]
    # the edit is kept as the new version's history: ids and time, never the old text
    status, history = await get(client, f"/me/v1/history?cellId={edited['cellId']}", token)
    assert status == 200
    assert [h["cellId"] for h in history["replaced"]] == [agent_cell.cell_id.hex()]
    assert "Oslo" not in json.dumps(history)
    # the grant's token is refused from now on, the recall shows Bergen and not Oslo
    from saihm.errors import Unauthenticated

    with pytest.raises(Unauthenticated):
        operator.store.authenticate(person.grant_token)
    _, items = await call(client, token, "saihm_recall", {})
    texts = [i["plaintext"] for i in items]
    assert "moved to Bergen" in texts and "lives in Oslo" not in texts


async def test_a_method_outside_the_page_is_refused(client, operator, authority, state):
    person = Person(operator, authority)
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    for method in ("saihm_share", "saihm_forget_session", "saihm_governance_vote", "nope"):
        assert await call(client, token, method) == (404, {"error": "unknown_method"})


async def test_records_written_by_raw_store_access_are_refused(client, operator, authority, state):
    """The person namespace is sealed with the store's record key (outside the data
    directory): a link or a passkey written by raw access to the store grants nothing."""
    import hashlib

    from saihm.projections.keys import dumps
    from tests.me.authenticator import Authenticator as Auth

    person = Person(operator, authority)
    db = operator.store.storage.namespace(b"person")
    # a forged link: the attacker knows the code because they wrote its digest
    code = secrets.token_bytes(32)
    link_id = secrets.token_bytes(16)
    forged_link = {
        "h": person.holder_id,
        "c": hashlib.sha256(code).digest(),
        "x": state.now() + 3600,
        "o": ORIGIN,
        "r": "localhost",
    }
    # a forged passkey: the attacker's own key, enrolled for the victim by a raw write
    attacker = Auth(ORIGIN)
    real = await enrol(client, state, person.holder_id, Auth(ORIGIN))  # a real one, for contrast
    _, options = await post(client, "/me/v1/signin/options")
    attacker.create({"rp": {"id": "localhost"}, "challenge": "AA", "user": {"id": "AA"}})
    passkey = attacker.passkeys[0]
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    point = passkey.key.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    import cbor2

    cose = cbor2.dumps({1: 2, 3: -7, -1: 1, -2: point[1:33], -3: point[33:]})
    forged_key = {
        "h": person.holder_id,
        "id": passkey.credential_id,
        "pk": cose,
        "n": 0,
        "o": ORIGIN,
        "r": "localhost",
        "t": state.now(),
    }
    with operator.store.storage.write() as txn:
        txn.put(b"L" + link_id, dumps(forged_link), db=db)
        txn.put(b"K" + hashlib.sha256(passkey.credential_id).digest(), dumps(forged_key), db=db)
        txn.commit()
    from tests.me.authenticator import b64

    assert await post(client, "/me/v1/enrol/options", {"link": f"{link_id.hex()}.{b64(code)}"}) == (
        401,
        {"error": "link_refused"},
    )
    assertion = attacker.get(options["publicKey"], passkey=passkey)
    body = {"ceremonyId": options["ceremonyId"], "credential": assertion}
    assert await post(client, "/me/v1/signin", body) == (401, {"error": "passkey_refused"})
    assert len(state.passkeys(person.holder_id)) == 1  # only the real one is listed
    assert (await call(client, real, "saihm_status"))[0] == 200


async def test_what_each_grant_read_is_kept_for_the_person_not_in_the_log(
    client, operator, authority, state
):
    from saihm.http.common import EXECUTOR

    person = Person(operator, authority)
    for text in ("one", "two", "three"):
        operator.memory.remember(operator.store.authenticate(person.session_token), text)
    size = _size(operator)
    headers = {"Authorization": f"Bearer {person.grant_token}"}
    body = {"method": "saihm_recall", "params": {"limit": 2}}
    async with client.post("/", json=body, headers=headers) as resp:
        assert resp.status == 200 and len(await resp.json()) == 2
    async with client.post(
        "/", json={"method": "saihm_recall", "params": {}}, headers=headers
    ) as r:
        assert r.status == 200
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    status, grants = await get(client, "/me/v1/grants", token)
    assert status == 200
    use = grants["uses"][person.grant_id]
    assert use["calls"] == 2 and use["cells"] == 5 and use["lastCells"] == 3
    assert [n for _, n in use["reads"]] == [3, 2]  # newest first
    assert person.narrow_id not in grants["uses"]  # a grant that read nothing
    # the public log has the two RECALL receipts, naming the holder, never the grant
    assert _operations(operator, size) == ["RECALL", "RECALL"]
    with operator.store.read_txn() as txn:
        leaves = operator.store.tree.leaves(txn, size, _size(operator))
    assert all(bytes.fromhex(person.grant_id) not in leaf for leaf in leaves)
    # the first read is written to the store (the second waits in the worker's memory, at
    # most USE_FLUSH_SECONDS); run the worker's pending writes, then another worker (a second
    # PersonState over the same store) sees the first
    client.server.app[EXECUTOR].shutdown(wait=True)
    other = PersonState(operator.store)
    assert other.grant_uses(person.holder_id)[person.grant_id]["reads"] == [use["reads"][1]]


async def test_a_consumer_grants_provider_reads_are_kept_for_the_person(
    client, operator, authority, state
):
    """The Memory Provider's ``/memory/v1`` reads (saihm/provider/http.py) are noted for the
    person's page through the same hook as ``saihm_recall``: a query by a consumer's grant
    shows under that grant's uses, with the records it returned."""
    from saihm.events import Capability

    person = Person(operator, authority, vault=True)
    assert person.consumer_token is not None
    grant_id = Capability.from_token(person.consumer_token).scope.grant_id
    assert grant_id is not None
    session = operator.store.authenticate(person.session_token)
    for text in ("likes tea", "walks at noon"):
        operator.memory.remember(session, text, namespace="notes")
    headers = {"Authorization": f"Bearer {person.consumer_token}"}
    async with client.post("/memory/v1/query", json={}, headers=headers) as resp:
        assert resp.status == 200
        returned = len((await resp.json())["records"])
    assert returned == 2
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    status, grants = await get(client, "/me/v1/grants", token)
    assert status == 200
    use = grants["uses"][grant_id.hex()]
    assert use["calls"] == 1 and use["cells"] == returned
    assert person.grant_id not in grants["uses"]  # the agent's grant read nothing


async def test_the_persons_reads_log_no_receipt_and_an_agents_do(
    client, operator, authority, state
):
    """Issue 35 item 4: the person's own visits (recall, status with the person credential)
    publish nothing under their holderId; an agent's recall and status still log a receipt,
    and the person's writes still do."""
    person = Person(operator, authority)
    operator.memory.remember(operator.store.authenticate(person.session_token), "likes tea")
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    size = _size(operator)
    assert (await call(client, token, "saihm_recall", {}))[0] == 200
    assert (await call(client, token, "saihm_recall", {"query": "tea"}))[0] == 200
    assert (await call(client, token, "saihm_status"))[0] == 200
    assert _size(operator) == size  # the person's reads: no receipt
    for agent in (person.session_token, person.grant_token):
        headers = {"Authorization": f"Bearer {agent}"}
        for method in ("saihm_recall", "saihm_status"):
            async with client.post(
                "/", json={"method": method, "params": {}}, headers=headers
            ) as r:
                assert r.status == 200
    assert _operations(operator, size) == ["RECALL", "STATUS", "RECALL", "STATUS"]
    size = _size(operator)
    assert (await call(client, token, "saihm_remember", {"content": "likes coffee"}))[0] == 200
    assert _operations(operator, size) == ["REMEMBER"]  # the person's writes still log


def test_a_person_flag_set_by_hand_still_logs_the_read(operator, authority):
    """Only an access the store issued as the person's (sealed) skips the read receipt; an
    agent's access widened with ``person=True`` by hand is logged as any agent's read."""
    import dataclasses

    from saihm.events import Operation

    person = Person(operator, authority)
    agent = operator.store.authenticate(person.grant_token)
    forged = dataclasses.replace(agent, person=True)
    size = _size(operator)
    operator.context.log_receipt(forged, Operation.STATUS)
    assert _operations(operator, size) == ["STATUS"]
    real = operator.store.person_access(person.holder_id, b"\x01" * 32, all_sessions=True)
    operator.context.log_receipt(real, Operation.STATUS)
    assert _size(operator) == size + 1
