"""Every input a client can send gets a 4xx protocol code, never a 500 (issue 11, Build 6).

Hypothesis fuzzes the params of every binding method (the eight tools and the extension
methods) and the bodies of the /memory/v1 routes against the real app on the loopback:
arbitrary JSON values, wrong types, huge integers, lone surrogates, deep nesting and oversize
strings, beside ids of objects that exist. Each answer must be below 500; a failure must be
exactly ``{"error": code}`` with a code docs/formats.md lists; and a refused call must change
nothing (the log's tree size and the held proposals are unchanged).

``SAIHM_LONG=1`` runs 20 times as many examples. The counts of examples run and of 500s are
kept in ``COUNTS`` and printed by ``test_fuzz_counts`` (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import functools
import http.client
import json
import os
import re
import secrets
import threading
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = 20 if os.environ.get("SAIHM_LONG") == "1" else 1
SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
COUNTS: Counter[str] = Counter()
FORMATS = Path(__file__).resolve().parents[2] / "docs" / "formats.md"


@functools.cache
def documented_codes() -> frozenset[str]:
    """Every error code docs/formats.md's "Error codes" section names."""
    text = FORMATS.read_text()
    section = re.split(r"^## [0-9. ]*Error codes$", text, flags=re.M)[1].split("\n## ", 1)[0]
    return frozenset(re.findall(r"`([a-z_]+)`", section))


# -- the server ----------------------------------------------------------------------------


class Server:
    """The real app over a real store, served from a thread on 127.0.0.1."""

    def __init__(self, tmp: Path) -> None:
        from saihm.compose import initialise, open_operator
        from saihm.config import Config
        from saihm.events import CapabilityScope
        from saihm.provider.vault import LocalVault

        config = Config.for_data(tmp / "data", rate_limit=0, governance=True)
        self.authority = initialise(config)
        self.operator = open_operator(config, checkpointer=False)
        store = self.operator.store
        vault, _ = LocalVault.init(self.operator, self.authority)
        _, self.consumer = vault.grant("agent", ["notes"], "readwrite")
        _, self.reader = vault.grant("reader", ["notes"], "read")
        self.holder_id = self.operator.admin.create_holder()
        self.session_id = secrets.token_bytes(32)
        self.token = self.authority.issue(
            self.holder_id, self.session_id, CapabilityScope(), 3600
        ).to_token()
        other = self.operator.admin.create_holder()
        self.other = self.authority.issue(
            other, secrets.token_bytes(32), CapabilityScope(), 3600
        ).to_token()
        access = store.authenticate(self.token)
        cell = self.operator.memory.remember(access, "a fact to share", namespace="notes")
        self.cell_id = cell.cell_id.hex()
        contract = self.operator.sharing.share(
            access, [other], [cell.cell_id], "PERMANENT", "read", None
        )
        self.contract_id = contract.contract_id.hex()
        self.ids = [
            self.cell_id,
            self.contract_id,
            self.holder_id.hex(),
            other.hex(),
            self.session_id.hex(),
            "0" * 64,
            "f" * 64,
        ]
        self._start()

    def _start(self) -> None:
        from saihm.http.app import create_app
        from saihm.http.guard import GuardedAppRunner

        ready = threading.Event()
        self.loop = asyncio.new_event_loop()

        async def run() -> None:
            from aiohttp import web

            self.runner = GuardedAppRunner(create_app(self.operator))
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.port = self.runner.addresses[0][1]
            ready.set()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(run())
            self.loop.run_forever()

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        assert ready.wait(30), "the fuzz server did not start"
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.operator.store.close()

    def state(self) -> tuple[int, int]:
        store = self.operator.store
        return store.size(), len(store.held.items())

    def send(self, method: str, path: str, body: bytes | None, token: str | None):
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                if attempt:
                    raise
        raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("fuzz"))
    yield s
    s.close()


def check(server: Server, method: str, path: str, body: bytes | None, token: str | None):
    """Send one request and assert the rules of this module; returns the status."""
    before = server.state()
    status, raw = server.send(method, path, body, token)
    COUNTS["examples"] += 1
    if status >= 500:
        COUNTS["500s"] += 1
    assert status < 500, (status, raw[:200])
    if status >= 400:
        answer = json.loads(raw)
        assert set(answer) == {"error"}, answer
        assert answer["error"] in documented_codes(), answer
        assert server.state() == before, "a refused call changed state"
    return status


# -- strategies ----------------------------------------------------------------------------

HUGE = st.sampled_from(
    [2**64, 2**64 - 1, 2**63, 2**63 - 1, -(2**63) - 1, 2**53 + 1, 10**30, -1, 0, -(10**40)]
)
SURROGATE = st.sampled_from(["\ud800", "a\udfffb", "\udbff\udc00x", "notes\ud83d"])
ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=40)
LONG = st.sampled_from([1_000, 70_000, 300_000, 2_000_000]).map(lambda n: "x" * n)


def _nest(depth: int) -> str:
    """A marker that :func:`_dumps` turns into ``depth`` nested arrays (deeper than
    ``json.dumps`` itself can write)."""
    return f"\x00deep:{depth}\x00"


_DEEP = re.compile(r'"\\u0000deep:([0-9]+)\\u0000"')


DEEP = st.sampled_from([50, 900, 5_000, 60_000]).map(_nest)
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    HUGE,
    st.floats(allow_nan=False, allow_infinity=False),
    ANY_TEXT,
    SURROGATE,
    st.sampled_from(
        [
            "",
            "0",
            "1",
            "true",
            "temporary",
            "permanent",
            "syndicate",
            "read",
            "said",
            "did",
            "end",
            "notes",
            "memory",
            "0x" + "a" * 64,
            "1e309",
        ]
    ),
)
JSON = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=12,
)


def values(server: Server) -> st.SearchStrategy:
    ids = st.sampled_from(server.ids)
    return st.one_of(JSON, ids, st.lists(ids | SCALAR, max_size=4), LONG, DEEP, HUGE, SURROGATE)


PARAMS = {
    "saihm_remember": ["content", "namespace"],
    "saihm_record": ["content", "kind"],
    "saihm_recall": ["query"],
    "saihm_forget": ["id"],
    "saihm_forget_session": ["sessionId"],
    "saihm_status": [],
    "saihm_share": ["granteeIdHashesHex", "shardIds", "type", "scope", "expiryEpoch"],
    "saihm_revoke_share": ["contractId"],
    "saihm_accept_contract": ["contractId"],
    "saihm_decline_contract": ["contractId"],
    "saihm_governance_propose": ["scope", "paramKey", "proposedValue"],
    "saihm_governance_vote": ["proposalId", "approve"],
}
ROUTES = {
    "/memory/v1/query": ["consumer", "namespaces", "intent", "limit", "max_bytes", "text"],
    "/memory/v1/context": ["consumer", "namespaces", "intent", "limit", "max_bytes", "text"],
    "/memory/v1/graph": ["consumer", "namespaces", "entity", "depth", "limit"],
    "/memory/v1/store": [
        "consumer",
        "namespace",
        "content",
        "confidence",
        "verified_at",
        "sources",
    ],
}


@st.composite
def members(draw, server: Server, names: list[str]) -> dict:
    """A dict of some of ``names`` (and sometimes an unknown member) with fuzzed values."""
    chosen = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    out = {name: draw(values(server)) for name in chosen}
    if draw(st.integers(0, 9)) == 0:
        out[draw(ANY_TEXT)] = draw(JSON)
    return out


def bases(server: Server) -> dict[str, dict]:
    """Valid params of each method and route, which :func:`mutated` breaks one member at a
    time, so the fuzzer reaches the checks behind the first one."""
    share = {
        "granteeIdHashesHex": [server.ids[3]],
        "shardIds": [server.cell_id],
        "type": "syndicate",
        "scope": "read",
        "expiryEpoch": "0",
    }
    query = {"consumer": "agent", "namespaces": ["notes"], "limit": 5, "text": "fact"}
    return {
        "saihm_remember": {"content": "a fact", "namespace": "notes"},
        "saihm_record": {"content": "said this", "kind": "said"},
        "saihm_recall": {"query": "fact"},
        "saihm_forget": {"id": "0" * 64},
        "saihm_forget_session": {"sessionId": "0" * 64},
        "saihm_status": {},
        "saihm_share": share,
        "saihm_revoke_share": {"contractId": server.contract_id},
        "saihm_accept_contract": {"contractId": server.contract_id},
        "saihm_decline_contract": {"contractId": server.contract_id},
        "saihm_governance_propose": {
            "scope": "emission_param",
            "paramKey": "kek_rotation_hours",
            "proposedValue": "24",
        },
        "saihm_governance_vote": {"proposalId": "0" * 64, "approve": True},
        "/memory/v1/query": query,
        "/memory/v1/context": query,
        "/memory/v1/graph": {"consumer": "agent", "namespaces": ["notes"], "depth": 1},
        "/memory/v1/store": {"consumer": "agent", "namespace": "notes", "content": {"f": 1}},
    }


@st.composite
def mutated(draw, server: Server, name: str) -> dict:
    """The valid params of ``name`` with one or two members replaced or removed."""
    base = dict(bases(server)[name])
    if not base:
        return draw(members(server, []))
    for key in draw(st.lists(st.sampled_from(sorted(base)), min_size=1, max_size=2)):
        if draw(st.integers(0, 5)) == 0:
            base.pop(key, None)
        else:
            base[key] = draw(values(server))
    return base


def _tokens(server: Server) -> st.SearchStrategy:
    return st.sampled_from(
        [server.token] * 4 + [server.other, server.consumer, None, "x", "A" * 5000]
    )


def _dumps(obj: object) -> bytes:
    text = json.dumps(obj, ensure_ascii=True)
    text = _DEEP.sub(lambda m: "[" * int(m.group(1)) + '"x"' + "]" * int(m.group(1)), text)
    return text.encode()


@pytest.mark.parametrize("method", sorted(PARAMS))
def test_fuzz_binding_method_never_answers_500(server, method):
    @settings(SETTINGS, max_examples=35 * EXAMPLES)
    @given(data=st.data())
    def run(data):
        params = data.draw(
            st.one_of(
                mutated(server, method),
                mutated(server, method),
                members(server, PARAMS[method]),
                JSON,
            )
        )
        token = data.draw(_tokens(server))
        check(server, "POST", "/", _dumps({"method": method, "params": params}), token)

    run()


def test_fuzz_binding_envelope_never_answers_500(server):
    @settings(SETTINGS, max_examples=60 * EXAMPLES)
    @given(
        method=st.one_of(st.sampled_from(sorted(PARAMS)), ANY_TEXT, JSON),
        params=st.one_of(st.just({}), JSON),
        extra=st.dictionaries(ANY_TEXT, JSON, max_size=2),
        raw=st.one_of(st.none(), st.binary(max_size=64)),
    )
    def run(method, params, extra, raw):
        body = raw if raw is not None else _dumps({"method": method, "params": params, **extra})
        check(server, "POST", "/", body, server.token)

    run()


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_fuzz_memory_route_never_answers_500(server, route):
    @settings(SETTINGS, max_examples=35 * EXAMPLES)
    @given(data=st.data())
    def run(data):
        body = data.draw(
            st.one_of(
                mutated(server, route), mutated(server, route), members(server, ROUTES[route]), JSON
            )
        )
        if isinstance(body, dict) and data.draw(st.booleans()):
            body["consumer"] = data.draw(st.sampled_from(["agent", "reader"]))
        token = data.draw(
            st.sampled_from([server.consumer] * 3 + [server.reader, server.token, None, "x"])
        )
        check(server, "POST", route, _dumps(body), token)

    run()


def test_fuzz_memory_status_never_answers_500(server):
    for token in (server.consumer, server.reader, server.token, None, "x", "\x7f" * 3):
        check(server, "GET", "/memory/v1/status", None, token)


def test_the_known_500s_are_4xx(server):
    """The cases the issue names: expiryEpoch 2^64 as a JSON number, a lone surrogate in
    namespace, and an empty shardIds list (shard_not_found, the protocol's code)."""
    share = {
        "granteeIdHashesHex": [server.ids[3]],
        "shardIds": [server.cell_id],
        "type": "syndicate",
        "scope": "read",
        "expiryEpoch": 2**64,
    }
    body = _dumps({"method": "saihm_share", "params": share})
    assert check(server, "POST", "/", body, server.token) == 400
    status, raw = server.send("POST", "/", body, server.token)
    assert json.loads(raw) == {"error": "invalid_expiry"}
    body = _dumps({"method": "saihm_remember", "params": {"content": "x", "namespace": "\ud800"}})
    assert check(server, "POST", "/", body, server.token) == 400
    empty = {**share, "shardIds": [], "expiryEpoch": 0}
    status, raw = server.send(
        "POST", "/", _dumps({"method": "saihm_share", "params": empty}), server.token
    )
    assert (status, json.loads(raw)) == (400, {"error": "shard_not_found"})


def test_a_proposed_value_too_big_for_a_log_leaf_is_400_not_503(server):
    """Found by this fuzzer: a 70,000-character proposedValue made a PROPOSE receipt over the
    log's 64 KiB leaf bound, which failed inside the write (503)."""
    params = {"scope": "emission_param", "paramKey": "kek_rotation_hours"}
    for value in ("x" * 257, "x" * 70_000):
        body = _dumps(
            {"method": "saihm_governance_propose", "params": {**params, "proposedValue": value}}
        )
        assert check(server, "POST", "/", body, server.token) == 400


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def test_fuzz_bearer_tokens_never_answer_500(server):
    """Arbitrary bearer tokens: base64url text, the base64url of arbitrary bytes and of
    arbitrary CBOR, and a real token with one character changed."""
    import base64

    import cbor2

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    cbor = st.recursive(
        st.none() | st.booleans() | st.integers() | st.binary(max_size=40) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.integers(0, 7), inner),
        max_leaves=12,
    ).map(lambda v: b64(cbor2.dumps(v)))

    @st.composite
    def flipped(draw):
        i = draw(st.integers(0, len(server.token) - 1))
        c = draw(st.sampled_from(B64URL))
        return server.token[:i] + c + server.token[i + 1 :]

    tokens = st.one_of(
        st.text(B64URL, min_size=1, max_size=200),
        st.binary(max_size=300).map(b64),
        cbor,
        flipped(),
        st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=60),
    )

    @settings(SETTINGS, max_examples=80 * EXAMPLES)
    @given(token=tokens, route=st.sampled_from(["/", "/memory/v1/query"]))
    def run(token, route):
        body = {"method": "saihm_status", "params": {}} if route == "/" else {"consumer": "agent"}
        check(server, "POST", route, _dumps(body), token)

    run()


LOG_PATHS = [
    "/log/tile/{a}",
    "/log/tile/{a}/{b}",
    "/log/v1/entries?{q}",
    "/log/v1/proof/inclusion?{q}",
    "/log/v1/proof/consistency?{q}",
    "/log/v1/receipts?{q}",
    "/log/v1/receipts/{a}",
    "/log/v1/erasures?{q}",
]
QUERY_NAMES = [
    "start",
    "end",
    "index",
    "size",
    "size1",
    "size2",
    "hash",
    "leafHash",
    "cursor",
    "limit",
    "subjectId",
    "holderId",
    "operation",
    "after",
]


def test_fuzz_public_log_never_answers_500(server):
    """The public log API too: any path segment and query answers below 500, and every
    failure is a JSON ``{"error": code}`` from docs/formats.md."""
    from urllib.parse import quote, urlencode

    segment = st.one_of(
        ANY_TEXT, st.integers().map(str), HUGE.map(str), st.sampled_from(server.ids)
    )
    query = st.dictionaries(st.sampled_from(QUERY_NAMES), segment, max_size=4)

    @settings(SETTINGS, max_examples=80 * EXAMPLES)
    @given(template=st.sampled_from(LOG_PATHS), a=segment, b=segment, q=query)
    def run(template, a, b, q):
        safe = {k: v.encode("utf-8", "surrogatepass") for k, v in q.items()}
        path = template.format(
            a=quote(a.encode("utf-8", "surrogatepass"), safe=""),
            b=quote(b.encode("utf-8", "surrogatepass"), safe=""),
            q=urlencode(safe),
        )
        check(server, "GET", path, None, None)

    run()


def test_fuzz_counts():
    """The note's figures: examples run and 500s seen (must be 0)."""
    print(f"\nfuzz: {COUNTS['examples']} examples, {COUNTS['500s']} answers of 500")
    assert COUNTS["500s"] == 0
