"""The HTTPS binding: one POST per call, with every transport requirement of the protocol.

saihm-protocol "HTTPS binding" and "Transport requirements": certificate validation (and an
optional certificate pin), no redirects, a timeout after which the outcome is unknown, a
response bound enforced while reading, and error text that never carries the userinfo, query
or fragment of the endpoint, the Authorization value, or text from the HTTP library. Every
exception raised here is a :class:`~saihm.client.errors.ClientError` whose message the client
wrote itself.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from saihm.client._endpoint import redact_endpoint
from saihm.client._wire import normalise_excerpt, printable, result_identifier
from saihm.client.advice import configuration_fix
from saihm.client.errors import ClientError

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_RESPONSE_BYTES",
    "Target",
    "make_ssl_context",
    "post",
    "post_json",
    "read_bounded",
]

DEFAULT_TIMEOUT_SECONDS = 30.0
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Target:
    """A validated endpoint and what reaching it needs. ``url`` and ``auth`` are secrets."""

    url: str = field(repr=False)
    auth: str = field(repr=False)
    ssl_context: ssl.SSLContext | None = field(repr=False)
    pin: bytes | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_response_bytes: int = MAX_RESPONSE_BYTES

    @property
    def where(self) -> str:
        """The endpoint as it may appear in any text: ``scheme://host[:port]/path``."""
        return redact_endpoint(self.url)


def make_ssl_context(ca_file: str | None, what: str = "ca_file") -> ssl.SSLContext:
    """A verifying TLS context: the system trust store, or only the CAs in ``ca_file``.

    Certificate and host name validation are always on (saihm-protocol "Transport
    requirements"); Python's default context also refuses TLS below 1.2.
    """
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError, ValueError) as err:
        raise ClientError(f"{what} could not be loaded as a CA bundle", kind="config") from err


async def read_bounded(content: aiohttp.StreamReader, limit: int) -> bytes:
    """Read a body of at most ``limit`` bytes, counting while reading (chunked bodies included).

    Raises a ``too_large`` :class:`ClientError` as soon as more than ``limit`` bytes arrived.
    """
    body = bytearray()
    async for chunk in content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > limit:
            raise ClientError(
                f"the response exceeded {limit} bytes and was abandoned; "
                "the operator may or may not have acted",
                kind="too_large",
            )
    return bytes(body)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(body: bytes) -> Any:
    """Strict JSON (UTF-8, no NaN or Infinity); ``ValueError`` otherwise."""
    return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)


def _error_code(body: bytes) -> str | None:
    """The ``error`` member of a failure body when it is a printable identifier, else ``None``."""
    try:
        parsed = parse_json(body)
    except (ValueError, RecursionError):
        return None
    return result_identifier(parsed.get("error")) if isinstance(parsed, dict) else None


async def post(
    target: Target,
    method: str,
    params: dict[str, Any],
    session: aiohttp.ClientSession | None = None,
) -> Any:
    """POST ``{"method", "params"}`` to ``target`` and return the parsed 2xx JSON body.

    Uses ``session`` when given (its connector must have been made by :func:`connector`),
    else one session for this call. Raises :class:`ClientError` for every failure.
    """
    return await post_json(target, {"method": method, "params": params}, session)


async def post_json(
    target: Target,
    payload: dict[str, Any],
    session: aiohttp.ClientSession | None = None,
    *,
    path: str = "",
) -> Any:
    """POST ``payload`` as JSON to ``target``'s URL (joined with ``path``, a relative path
    such as ``"v1/holders"``), with every rule of :func:`post`, and return the parsed 2xx
    JSON body."""
    body = json.dumps(payload).encode("utf-8")
    headers = {"Content-Type": "application/json", "Authorization": target.auth}
    where = target.where
    seconds = target.timeout_seconds
    try:
        async with asyncio.timeout(seconds):
            if session is not None:
                return await _post(session, target, body, headers, path)
            async with new_session(target) as own:
                return await _post(own, target, body, headers, path)
    except ClientError:
        raise
    except TimeoutError as err:
        raise ClientError(
            f"no complete response from {where} within {seconds:g} s; "
            "the operator may or may not have acted",
            kind="timeout",
        ) from err
    except aiohttp.ServerFingerprintMismatch as err:
        raise ClientError(
            f"the TLS certificate of {where} does not match the pinned fingerprint; nothing sent",
            kind="not_sent",
        ) from err
    except aiohttp.ClientConnectorCertificateError as err:
        raise ClientError(
            f"the TLS certificate of {where} did not validate; nothing sent", kind="not_sent"
        ) from err
    except aiohttp.ClientSSLError as err:
        raise ClientError(
            f"the TLS handshake with {where} failed; nothing sent", kind="not_sent"
        ) from err
    except aiohttp.ClientConnectorError as err:
        raise ClientError(f"could not connect to {where}; nothing sent", kind="not_sent") from err
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as err:
        raise ClientError(
            f"the connection to {where} closed before a complete response; "
            "the operator may or may not have acted",
            kind="disconnected",
        ) from err
    except (aiohttp.ClientError, OSError, ValueError, UnicodeError) as err:
        # The library's own text may quote the URL or a header; only its type is shown.
        raise ClientError(
            f"HTTP error ({type(err).__name__}) talking to {where}; "
            "the operator may or may not have acted",
            kind="http",
        ) from err


def new_session(target: Target) -> aiohttp.ClientSession:
    """A session for ``target``: no proxies from the environment, the pin on the connector.

    With a pin, the connector carries the fingerprint and each request carries the verifying
    context, so aiohttp validates the chain and host name and then compares the fingerprint.
    """
    ssl_arg: Any = aiohttp.Fingerprint(target.pin) if target.pin else target.ssl_context
    if ssl_arg is None:
        ssl_arg = True
    connector = aiohttp.TCPConnector(ssl=ssl_arg)
    timeout = aiohttp.ClientTimeout(total=target.timeout_seconds)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False)


async def _post(
    session: aiohttp.ClientSession,
    target: Target,
    body: bytes,
    headers: dict[str, str],
    path: str = "",
) -> Any:
    limit = target.max_response_bytes
    request_ssl: Any = target.ssl_context if target.ssl_context is not None else True
    url = target.url.rstrip("/") + "/" + path if path else target.url
    async with session.post(
        url, data=body, headers=headers, allow_redirects=False, ssl=request_ssl
    ) as resp:
        status = resp.status
        reason = printable(resp.reason)
        shown = f"HTTP {status}" + (f" {reason}" if reason else "")
        if 300 <= status < 400:
            raise ClientError(
                f"{shown}: the endpoint answered with a redirect, which is a failure; "
                "it was not followed and nothing was re-sent",
                kind="redirect",
                http_status=status,
            )
        if resp.content_length is not None and resp.content_length > limit:
            if not 200 <= status < 300:
                raise ClientError(
                    f"{shown}: the operator reported a failure", kind="status", http_status=status
                )
            raise ClientError(
                f"{shown}: the response announced more than {limit} bytes and was not read; "
                "the operator may or may not have acted",
                kind="too_large",
            )
        if not 200 <= status < 300:
            try:
                code = _error_code(await read_bounded(resp.content, limit))
            except ClientError:
                code = None
            said = f'"{code}"' if code else "a failure"
            failure = ClientError(
                f"{shown}: the operator reported {said}",
                kind="status",
                http_status=status,
                operator_code=code,
                retry_after=resp.headers.get("Retry-After"),
            )
            failure.fix = configuration_fix(status, target.auth, urlsplit(target.url).path)
            raise failure
        raw = await read_bounded(resp.content, limit)
    try:
        return parse_json(raw)
    except (ValueError, RecursionError) as err:
        begins = normalise_excerpt(raw.decode("utf-8", errors="replace"))
        quoted = f' (begins: "{begins}")' if begins else ""
        raise ClientError(
            f"{shown} with a body that is not JSON{quoted}: probably a proxy or captive "
            "portal, not the operator; the operator may or may not have acted",
            kind="intermediary",
            http_status=status,
        ) from err
