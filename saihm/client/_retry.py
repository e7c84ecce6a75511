"""Waiting one's turn: bounded retries of calls the operator refused without applying them.

A bulk writer at the operator's per-token rate gets 429 ``rate_limited`` once its bucket is
empty (docs/operations.md "Rate limit": refused before the call reaches the operator, so it
changed nothing), and a write the store could not commit gets 503 (saihm-protocol "Order of
effect and receipt": for a state-changing tool "operator_storage_unavailable" and
"operator_log_unavailable" mean no receipt was written and nothing took effect). Those calls
are sent again after the wait the answer's ``Retry-After`` asks for (seconds or an HTTP-date,
RFC 9110 §10.2.3), or after a jittered exponential backoff when it names none, until
:attr:`RetryPolicy.max_attempts` calls were made or the next wait would end after
:attr:`RetryPolicy.deadline` seconds from the first call.

Nothing else is ever sent twice: no timeout, no broken connection, no answer without the
operator's error code (a 503 from something in front of the operator says nothing about what
the operator did), and no "operator_log_unavailable" from saihm_forget, saihm_revoke_share or
saihm_forget_session, where it means access was already withdrawn and the receipt is pending
(a repeat would answer "already erased", hiding that the first call acted).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import TypeVar

from saihm.client.errors import ClientError

__all__ = [
    "DEFAULT_DEADLINE_SECONDS",
    "DEFAULT_MAX_ATTEMPTS",
    "RetryPolicy",
    "parse_retry_after",
    "retryable",
    "with_retries",
]

T = TypeVar("T")

DEFAULT_MAX_ATTEMPTS = 8
DEFAULT_DEADLINE_SECONDS = 120.0
#: The first backoff when an answer names no wait; it doubles per attempt up to the cap.
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 30.0
#: The longest ``Retry-After`` header read (longer text is not a delay).
_HEADER_MAX = 64
#: Methods whose "operator_log_unavailable" means the effect already happened.
_WITHDRAWS_ACCESS = frozenset({"saihm_forget", "saihm_revoke_share", "saihm_forget_session"})
_NOT_APPLIED_503 = frozenset({"operator_storage_unavailable", "operator_log_unavailable"})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a refused call may keep trying: at most ``max_attempts`` calls in all (1: never
    retry), and no wait that would end more than ``deadline`` seconds after the first call
    began. A single call still runs for up to the client's ``timeout``."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    deadline: float = DEFAULT_DEADLINE_SECONDS

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise ClientError("max_attempts must be a whole number >= 1", kind="config")
        if not isinstance(self.deadline, int | float) or not 0 <= self.deadline < float("inf"):
            raise ClientError(
                "retry_deadline must be a finite number of seconds >= 0", kind="config"
            )


def parse_retry_after(value: str | None, now: float) -> float | None:
    """The wait in seconds a ``Retry-After`` value asks for at wall-clock time ``now`` (UNIX
    seconds), or None when it is absent or neither form of RFC 9110 §10.2.3: a non-negative
    decimal count of seconds, or an HTTP-date (a date in the past is a wait of 0)."""
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > _HEADER_MAX or not text.isascii() or not text.isprintable():
        return None
    if text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": an HTTP-date is always UTC
        when = when.replace(tzinfo=UTC)
    try:
        return max(0.0, when.timestamp() - now)
    except (OverflowError, OSError, ValueError):
        return None


def retryable(method: str, err: ClientError) -> bool:
    """Whether the operator refused ``method`` without applying it (module docstring)."""
    if err.kind != "status":
        return False
    if err.http_status == 429:
        return err.operator_code in (None, "rate_limited")
    if err.http_status == 503 and err.operator_code in _NOT_APPLIED_503:
        return not (err.operator_code == "operator_log_unavailable" and method in _WITHDRAWS_ACCESS)
    return False


def _backoff(attempt: int, rand: Callable[[], float]) -> float:
    """The wait after the ``attempt``-th refusal that named none: half of an exponentially
    growing step plus up to the other half at random (several clients refused together do not
    come back together)."""
    step = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
    return step / 2 + rand() * step / 2


def _spread(asked: float, rand: Callable[[], float]) -> float:
    """The operator's wait, never shortened, plus up to a tenth more (at most half a second)."""
    return asked + rand() * min(0.5, asked / 10)


async def with_retries(
    method: str,
    send: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    rand: Callable[[], float] = random.random,
) -> T:
    """``await send()``, sent again under ``policy`` while it raises a :func:`retryable`
    :class:`ClientError`. The error of the last call is raised when the attempts or the
    deadline run out (its message then says how many calls were made); any other error at
    once."""
    started = monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await send()
        except ClientError as err:
            if not retryable(method, err):
                raise
            asked = parse_retry_after(err.retry_after, wall())
            wait = _backoff(attempt, rand) if asked is None else _spread(asked, rand)
            elapsed = monotonic() - started
            if attempt >= policy.max_attempts or elapsed + wait > policy.deadline:
                if attempt > 1 or policy.max_attempts > 1:
                    err.args = (
                        f"{err} (gave up after {attempt} call{'s' if attempt > 1 else ''}: "
                        f"{'attempt' if attempt >= policy.max_attempts else 'deadline'} "
                        "bound reached; nothing was applied)",
                    )
                err.attempts = attempt
                raise
        await sleep(wait)
