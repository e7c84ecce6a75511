"""A per-token rate limit (issue 11, Build 6).

docs/operations.md: "each verified token draws one unit per call from a bucket keyed by its
tokenId ... an empty bucket answers 429 {"error":"rate_limited"} and the call changes nothing".
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import pytest

from saihm.config import Config
from saihm.http.limits import BUCKETS_MAX, TokenBuckets, check_limits
from tests.support.serve import SAIHM

BURST = 3


@dataclass
class FakeClock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_its_burst_then_refuses():
    buckets = TokenBuckets(1.0, BURST, clock=FakeClock())
    assert [buckets.take(b"a") for _ in range(BURST + 2)] == [True] * BURST + [False, False]
    assert buckets.take(b"b")  # another key has its own bucket


def test_a_bucket_refills_at_its_rate_up_to_its_burst():
    clock = FakeClock()
    buckets = TokenBuckets(2.0, BURST, clock=clock)
    for _ in range(BURST):
        assert buckets.take(b"a")
    assert not buckets.take(b"a")
    clock.now += 0.5  # one unit at 2 per second
    assert buckets.take(b"a")
    assert not buckets.take(b"a")
    clock.now += 3600  # never more than the burst
    assert [buckets.take(b"a") for _ in range(BURST + 1)] == [True] * BURST + [False]


def test_a_refused_take_draws_nothing():
    clock = FakeClock()
    buckets = TokenBuckets(1.0, 1, clock=clock)
    assert buckets.take(b"a")
    for _ in range(100):
        assert not buckets.take(b"a")
    clock.now += 1.0
    assert buckets.take(b"a")


def test_rate_zero_disables_limiting():
    buckets = TokenBuckets(0, 0)
    assert not buckets.enabled
    assert all(buckets.take(b"a") for _ in range(10_000))


def test_the_bucket_table_stays_bounded():
    clock = FakeClock()
    buckets = TokenBuckets(1.0, 1, clock=clock)
    for i in range(BUCKETS_MAX + 10):
        buckets.take(i.to_bytes(8, "big"))
    assert len(buckets._buckets) <= BUCKETS_MAX


@pytest.mark.parametrize(
    "fields",
    [
        {"rate_limit": -1.0},
        {"rate_limit": float("nan")},
        {"rate_limit": float("inf")},
        {"rate_limit": 5.0, "rate_burst": 0},
        {"pending_max": 0},
        {"pending_ttl": 0},
    ],
)
def test_nonsense_limits_are_refused(tmp_path, fields):
    from saihm.errors import MalformedInput

    with pytest.raises(MalformedInput):
        check_limits(Config.for_data(tmp_path, **fields))


# -- over HTTP -----------------------------------------------------------------------------


@pytest.fixture
def limited(tmp_path):
    from saihm.compose import initialise, open_operator

    config = Config.for_data(tmp_path / "data", rate_limit=0.001, rate_burst=BURST)
    authority = initialise(config)
    operator = open_operator(config, checkpointer=False)
    yield operator, authority
    operator.store.close()


async def test_a_token_over_its_burst_gets_429_rate_limited_and_changes_nothing(
    aiohttp_client, limited, make_holder, call
):
    from saihm.http.app import create_app

    operator, authority = limited
    client = await aiohttp_client(create_app(operator))
    alice, bob = make_holder(operator, authority), make_holder(operator, authority)
    for _ in range(BURST):
        assert (await call(client, alice, "saihm_status"))[0] == 200
    size = operator.store.size()
    for method, params in [("saihm_status", {}), ("saihm_remember", {"content": "x"})]:
        async with client.post(
            "/", json={"method": method, "params": params}, headers=alice.auth
        ) as resp:
            assert resp.status == 429
            assert await resp.json() == {"error": "rate_limited"}
            assert int(resp.headers["Retry-After"]) >= 1
    assert operator.store.size() == size
    # the memory provider routes are charged too
    async with client.get("/memory/v1/status", headers=alice.auth) as resp:
        assert resp.status == 429
    # another token has its own bucket; the public log is not limited
    assert (await call(client, bob, "saihm_status"))[0] == 200
    async with client.get("/log/checkpoint") as resp:
        assert resp.status == 200


async def test_a_forged_token_with_a_real_token_id_cannot_drain_its_bucket(
    aiohttp_client, limited, make_holder, call
):
    from saihm.events import Capability
    from saihm.http.app import create_app

    operator, authority = limited
    client = await aiohttp_client(create_app(operator))
    alice = make_holder(operator, authority)
    cap = Capability.from_token(alice.token)
    forged_sig = bytes([cap.signature[0] ^ 1]) + cap.signature[1:]
    forged = cap.model_copy(update={"signature": forged_sig}).to_token()
    assert Capability.from_token(forged).token_id == cap.token_id
    headers = {"Authorization": f"Bearer {forged}"}
    for _ in range(BURST * 3):
        async with client.post("/", json={"method": "saihm_status"}, headers=headers) as resp:
            assert resp.status == 401
    for _ in range(BURST):
        assert (await call(client, alice, "saihm_status"))[0] == 200
    assert (await call(client, alice, "saihm_status")) == (429, {"error": "rate_limited"})


async def test_no_token_passes_to_the_handler_and_is_refused_401(aiohttp_client, limited):
    from saihm.http.app import create_app

    operator, _ = limited
    client = await aiohttp_client(create_app(operator))
    for _ in range(BURST * 2):
        async with client.post("/", json={"method": "saihm_status"}) as resp:
            assert resp.status == 401


def test_the_default_limit_is_generous(tmp_path):
    config = Config.for_data(tmp_path)
    assert config.rate_limit >= 50 and config.rate_burst >= 200


# -- the serve options ----------------------------------------------------------------------


def test_serve_help_states_the_config_defaults():
    done = subprocess.run([SAIHM, "serve", "--help"], capture_output=True, text=True, check=True)
    text = " ".join(done.stdout.split())
    defaults = Config.for_data("/tmp/x")
    assert f"(default {defaults.rate_limit:g}; 0 disables)" in text
    assert f"(default {defaults.rate_burst})" in text
    assert f"per consumer (default {defaults.pending_max})" in text
    assert f"(default {defaults.pending_ttl}, 7 days)" in text


@pytest.mark.parametrize(
    "option",
    [["--rate-limit", "-1"], ["--rate-limit", "5", "--rate-burst", "0"], ["--pending-max", "0"]],
)
def test_serve_refuses_nonsense_limits_in_one_line(tmp_path, option):
    done = subprocess.run(
        [SAIHM, "serve", "--data", str(tmp_path / "d"), "--port", "0", *option],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "d").exists()


def test_saihm_serve_applies_its_rate_options(tmp_path):
    from tests.support.serve import holder_create, post, serving

    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data), "--rate-limit", "0.001", "--rate-burst", "2") as (
        _proc,
        url,
    ):
        token = holder_create(data)["token"]
        answers = [post(url, token, "saihm_status", {}) for _ in range(3)]
        assert [status for status, _ in answers] == [200, 200, 429]
        assert answers[2][1] == {"error": "rate_limited"}
        other = holder_create(data)["token"]
        assert post(url, other, "saihm_status", {})[0] == 200
