"""Clients that wait their turn (issue 32 item 8): a call the operator refused without applying
it (429, or a 503 that means nothing took effect) is sent again after ``Retry-After``, within
an attempt bound and a total deadline; nothing else is ever sent twice."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from saihm.client import AsyncClient, Client, ClientError
from saihm.client._retry import RetryPolicy, parse_retry_after, retryable, with_retries
from tests.mcp.fake_operator import CELL_ID, SECRET, FakeOperator, json_reply, serve_operator

AUTH = f"Bearer {SECRET}"
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def refusal(
    status: int = 429, code: str | None = "rate_limited", retry_after: str | None = None
) -> ClientError:
    return ClientError(
        f"HTTP {status}",
        kind="status",
        http_status=status,
        operator_code=code,
        retry_after=retry_after,
    )


@dataclass
class FakeTransport:
    """Answers each send with the next scripted outcome, on a clock only the waits move."""

    outcomes: list[object]
    now: float = 0.0
    sends: int = 0
    waits: list[float] = field(default_factory=list)

    async def send(self) -> object:
        outcome = self.outcomes[min(self.sends, len(self.outcomes) - 1)]
        self.sends += 1
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    async def run(self, policy: RetryPolicy, method: str = "saihm_remember", rand: float = 0.0):
        return await with_retries(
            method,
            self.send,
            policy,
            monotonic=lambda: self.now,
            wall=lambda: NOW + self.now,
            sleep=self.sleep,
            rand=lambda: rand,
        )


# -- Retry-After (RFC 9110 §10.2.3) ----------------------------------------------------------


@given(st.integers(min_value=0, max_value=10**12))
def test_retry_after_in_seconds_is_that_many_seconds(seconds: int) -> None:
    assert parse_retry_after(str(seconds), NOW) == seconds
    assert parse_retry_after(f" {seconds} ", NOW) == seconds


@given(st.integers(min_value=-(10**6), max_value=10**7))
def test_retry_after_as_an_http_date_is_the_time_until_it(offset: int) -> None:
    when = datetime.fromtimestamp(NOW, UTC) + timedelta(seconds=offset)
    header = format_datetime(when, usegmt=True)  # IMF-fixdate, "Thu, 01 Jan 2026 00:00:00 GMT"
    assert parse_retry_after(header, NOW) == max(0, offset)


def test_retry_after_accepts_the_obsolete_http_date_forms() -> None:
    # RFC 9110 §5.6.7: a recipient accepts rfc850-date and asctime-date too.
    assert parse_retry_after("Thursday, 01-Jan-26 00:00:30 GMT", NOW) == 30
    assert parse_retry_after("Thu Jan  1 00:00:30 2026", NOW) == 30


@pytest.mark.parametrize("value", [None, "", "-1", "1.5", "soon", "0x10", "１２", "1 2", "9" * 80])
def test_retry_after_that_is_neither_form_names_no_wait(value: str | None) -> None:
    assert parse_retry_after(value, NOW) is None


@given(st.text(max_size=80))
def test_retry_after_never_raises_and_never_asks_a_negative_wait(value: str) -> None:
    wait = parse_retry_after(value, NOW)
    assert wait is None or wait >= 0


# -- what is retried ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "err", "expected"),
    [
        ("saihm_remember", refusal(429, "rate_limited"), True),
        ("saihm_forget", refusal(429, "rate_limited"), True),
        ("saihm_remember", refusal(429, None), True),
        ("saihm_remember", refusal(503, "operator_storage_unavailable"), True),
        ("saihm_remember", refusal(503, "operator_log_unavailable"), True),
        ("saihm_forget", refusal(503, "operator_storage_unavailable"), True),
        # "operator_log_unavailable" from forget/revoke: access already withdrawn.
        ("saihm_forget", refusal(503, "operator_log_unavailable"), False),
        ("saihm_revoke_share", refusal(503, "operator_log_unavailable"), False),
        ("saihm_forget_session", refusal(503, "operator_log_unavailable"), False),
        # A 503 without the operator's code: something in front answered; outcome unknown.
        ("saihm_remember", refusal(503, None), False),
        ("saihm_remember", refusal(500, "internal"), False),
        ("saihm_remember", refusal(400, "empty_content"), False),
        ("saihm_remember", ClientError("t", kind="timeout"), False),
        ("saihm_remember", ClientError("d", kind="disconnected"), False),
        ("saihm_remember", ClientError("n", kind="not_sent"), False),
    ],
)
def test_only_a_call_the_operator_did_not_apply_is_retried(method, err, expected) -> None:
    assert retryable(method, err) is expected


async def test_a_429_is_sent_again_after_its_retry_after() -> None:
    fake = FakeTransport([refusal(retry_after="3"), refusal(retry_after="2"), "ok"])
    assert await fake.run(RetryPolicy(max_attempts=5, deadline=60)) == "ok"
    assert fake.sends == 3 and fake.waits == [3, 2]


async def test_the_wait_is_never_shorter_than_retry_after_and_jitter_adds_at_most_a_tenth() -> None:
    fake = FakeTransport([refusal(retry_after="4"), "ok"])
    await fake.run(RetryPolicy(), rand=0.999)
    [wait] = fake.waits
    assert 4 <= wait <= 4.4


async def test_an_http_date_retry_after_is_waited_until() -> None:
    later = format_datetime(datetime.fromtimestamp(NOW + 7, UTC), usegmt=True)
    fake = FakeTransport([refusal(503, "operator_storage_unavailable", later), "ok"])
    assert await fake.run(RetryPolicy()) == "ok"
    assert fake.waits == [7]


async def test_without_retry_after_the_backoff_grows_and_is_jittered() -> None:
    fake = FakeTransport([refusal(), refusal(), refusal(), "ok"])
    await fake.run(RetryPolicy(max_attempts=4, deadline=60), rand=0.0)
    assert fake.waits == [0.25, 0.5, 1.0]
    jittered = FakeTransport([refusal(), "ok"])
    await jittered.run(RetryPolicy(), rand=0.5)
    assert jittered.waits == [0.375]


async def test_the_attempt_bound_raises_the_last_refusal() -> None:
    fake = FakeTransport([refusal(retry_after="1")])
    with pytest.raises(ClientError) as caught:
        await fake.run(RetryPolicy(max_attempts=3, deadline=60))
    assert fake.sends == 3 and fake.waits == [1, 1]
    assert caught.value.attempts == 3 and caught.value.operator_code == "rate_limited"
    assert "gave up after 3 calls" in str(caught.value)


async def test_one_attempt_turns_retrying_off() -> None:
    fake = FakeTransport([refusal(retry_after="1"), "ok"])
    with pytest.raises(ClientError):
        await fake.run(RetryPolicy(max_attempts=1))
    assert fake.sends == 1 and fake.waits == []


async def test_no_wait_ends_after_the_deadline() -> None:
    fake = FakeTransport([refusal(retry_after="4")])
    with pytest.raises(ClientError) as caught:
        await fake.run(RetryPolicy(max_attempts=100, deadline=10))
    # Waits of 4 and 4 end at 8; a third would end at 12, past the deadline.
    assert fake.waits == [4, 4] and fake.sends == 3
    assert "deadline" in str(caught.value)


async def test_a_retry_after_longer_than_the_deadline_is_not_waited() -> None:
    fake = FakeTransport([refusal(retry_after="3600"), "ok"])
    with pytest.raises(ClientError):
        await fake.run(RetryPolicy(deadline=120))
    assert fake.sends == 1 and fake.waits == []


async def test_an_error_that_is_not_retryable_is_raised_at_once() -> None:
    fake = FakeTransport([ClientError("no answer", kind="timeout"), "ok"])
    with pytest.raises(ClientError) as caught:
        await fake.run(RetryPolicy())
    assert fake.sends == 1 and caught.value.kind == "timeout" and caught.value.attempts == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"max_attempts": True},
        {"retry_deadline": -1},
        {"retry_deadline": float("inf")},
    ],
)
def test_bad_retry_settings_are_refused_before_any_call(kwargs) -> None:
    with pytest.raises(ClientError) as caught:
        AsyncClient("http://127.0.0.1:1/", AUTH, **kwargs)
    assert caught.value.kind == "config"


# -- through the real client and HTTP --------------------------------------------------------


def limited_then(refusals: int, **headers: str):
    """A handler answering ``refusals`` times 429 rate_limited (with ``headers``), then 200."""
    left = [refusals]

    async def handler(request: web.Request) -> web.StreamResponse:
        if left[0] > 0:
            left[0] -= 1
            return web.json_response({"error": "rate_limited"}, status=429, headers=headers)
        return await json_reply({"cellId": CELL_ID})(request)

    return handler


async def test_async_client_honours_retry_after_from_the_wire() -> None:
    fake = FakeOperator(routes={"saihm_remember": limited_then(2, **{"Retry-After": "0"})})
    async with serve_operator(fake) as url:
        stored = await AsyncClient(url, AUTH).remember("hello")
    assert stored.cell_id == CELL_ID and fake.methods == ["saihm_remember"] * 3


def test_sync_client_gives_up_at_its_attempt_bound() -> None:
    fake = FakeOperator(routes={"saihm_remember": limited_then(99, **{"Retry-After": "0"})})

    async def run() -> None:
        async with serve_operator(fake) as url:

            def call() -> None:
                with Client(url, AUTH, max_attempts=4) as client:
                    client.remember("hello")

            await asyncio.to_thread(call)

    with pytest.raises(ClientError) as caught:
        asyncio.run(run())
    assert caught.value.http_status == 429 and caught.value.attempts == 4
    assert fake.methods == ["saihm_remember"] * 4 and SECRET not in str(caught.value)


async def test_a_503_without_the_operators_code_is_not_sent_twice() -> None:
    fake = FakeOperator(routes={"saihm_remember": json_reply({"error": "gateway"}, 503)})
    async with serve_operator(fake) as url:
        with pytest.raises(ClientError) as caught:
            await AsyncClient(url, AUTH).remember("hello")
    assert caught.value.http_status == 503 and fake.methods == ["saihm_remember"]
