"""Per-token rate limiting: a token bucket for each verified capability (Build 6).

Each call that presents ``Authorization: Bearer <token>`` draws one unit from the bucket of the
token's ``tokenId`` (never the token itself): ``rate`` units refill per second up to ``burst``.
An empty bucket answers 429 ``{"error": "rate_limited"}`` (saihm-protocol, saihm_remember
"Errors") before the call reaches the operator, so a refused call changes nothing.

Only a token whose authority signature verifies draws from a bucket: a forged token that copies
another token's id cannot drain that bucket (it is refused as unauthenticated by the handler).
The buckets live in one serving process; with ``--workers N`` a token may make up to N times
the rate (docs/operations.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from saihm.errors import MalformedInput, SaihmError
from saihm.events import Capability, verify_capability

if TYPE_CHECKING:
    from saihm.config import Config

__all__ = [
    "BUCKETS_MAX",
    "SERVE_FIELDS",
    "TokenBuckets",
    "check_limits",
    "rate_limit_middleware",
    "with_serve_limits",
]

#: Most buckets kept; past it, full (idle) buckets are dropped, then the oldest.
BUCKETS_MAX = 65_536
#: Most verified tokens remembered (digest -> tokenId), so a token's signature is checked once.
VERIFIED_MAX = 4096


@dataclass
class _Bucket:
    level: float
    stamp: float


class TokenBuckets:
    """Token buckets keyed by bytes (a token id), refilled at ``rate`` per second to ``burst``.

    ``rate`` of 0 disables limiting: :meth:`take` always succeeds.
    """

    def __init__(
        self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate < 0 or burst < 0:
            raise ValueError("rate and burst are not negative")
        if rate > 0 and burst < 1:
            raise ValueError("a burst of at least 1 is needed when rate limiting is on")
        self.rate = float(rate)
        self.burst = int(burst)
        self._clock = clock
        self._buckets: dict[bytes, _Bucket] = {}

    @property
    def enabled(self) -> bool:
        """Whether any call can be refused."""
        return self.rate > 0

    def take(self, key: bytes) -> bool:
        """Draw one unit from ``key``'s bucket; False (and nothing drawn) when it is empty."""
        if not self.enabled:
            return True
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= BUCKETS_MAX:
                self._evict(now)
            bucket = self._buckets[key] = _Bucket(float(self.burst), now)
        else:
            elapsed = max(0.0, now - bucket.stamp)
            bucket.level = min(float(self.burst), bucket.level + elapsed * self.rate)
            bucket.stamp = now
        if bucket.level < 1.0:
            return False
        bucket.level -= 1.0
        return True

    def _evict(self, now: float) -> None:
        # A bucket that would be full again holds no state worth keeping.
        full = [
            key
            for key, b in self._buckets.items()
            if b.level + (now - b.stamp) * self.rate >= self.burst
        ]
        for key in full:
            del self._buckets[key]
        if len(self._buckets) >= BUCKETS_MAX:
            oldest = sorted(self._buckets, key=lambda k: self._buckets[k].stamp)
            for key in oldest[: len(oldest) // 2]:
                del self._buckets[key]


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def rate_limit_middleware(
    buckets: TokenBuckets,
    authority_public_key: bytes,
    *,
    now: Callable[[], float] = time.time,
) -> Middleware:
    """An aiohttp middleware charging each call with a verified bearer token to its bucket.

    A request without a token, or with one that does not verify, passes through untouched:
    the handler refuses it (401) and no bucket is charged.
    """
    verified: dict[bytes, bytes] = {}

    def token_id(token: str) -> bytes | None:
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        known = verified.get(digest)
        if known is not None:
            return known
        try:
            cap = Capability.from_token(token)
            verify_capability(cap, authority_public_key, int(now()))
        except SaihmError:
            # Any token that is not a valid capability passes through uncharged: the handler
            # refuses it (401). This middleware sits outside the error middleware, so nothing
            # may escape it.
            return None
        if len(verified) >= VERIFIED_MAX:
            verified.clear()
        verified[digest] = cap.token_id
        return cap.token_id

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if buckets.enabled:
            token = _bearer(request)
            key = None if token is None else token_id(token)
            if key is not None and not buckets.take(key):
                return web.Response(
                    text='{"error":"rate_limited"}',
                    status=429,
                    content_type="application/json",
                    headers={
                        "Cache-Control": "no-store",
                        "Retry-After": str(max(1, math.ceil(1 / buckets.rate))),
                    },
                )
        return await handler(request)

    return middleware


#: The ``saihm serve`` options this module owns, by their Config field names.
SERVE_FIELDS = ("rate_limit", "rate_burst", "pending_max", "pending_ttl")


def check_limits(config: Config) -> None:
    """Refuse (:class:`MalformedInput`) limits that make no sense: a negative rate, a burst
    under 1 while limiting is on, a proposal cap or lifetime under 1."""
    if not config.rate_limit >= 0 or math.isinf(config.rate_limit):
        raise MalformedInput("--rate-limit must be a finite number >= 0 (0 disables)")
    if config.rate_limit > 0 and config.rate_burst < 1:
        raise MalformedInput("--rate-burst must be at least 1 while --rate-limit is on")
    if config.pending_max < 1:
        raise MalformedInput("--pending-max must be at least 1")
    if config.pending_ttl < 1:
        raise MalformedInput("--pending-ttl must be at least 1 second")


def with_serve_limits(config: Config, options: Mapping[str, float | int | None]) -> Config:
    """``config`` with the rate-limit and pending-proposal ``options`` given (by Config field
    name; absent or None options keep the config's values), checked."""
    given: dict[str, Any] = {f: options[f] for f in SERVE_FIELDS if options.get(f) is not None}
    updated = dataclasses.replace(config, **given)
    check_limits(updated)
    return updated
