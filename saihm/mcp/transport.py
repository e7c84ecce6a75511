"""The HTTPS binding: one POST per tool call, with every transport requirement of the protocol.

saihm-protocol "HTTPS binding" and "Transport requirements": certificate validation, no
redirects, a timeout after which the outcome is unknown, a 16 MiB bound enforced while
reading, and error text that never carries the userinfo, query or fragment of the endpoint,
the Authorization value, or text from the HTTP library. Every exception raised here is a
:class:`TransportError` whose message the client wrote itself.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any, ClassVar

import aiohttp

from saihm.errors import SaihmError
from saihm.mcp.checks import normalise_excerpt, printable, result_identifier
from saihm.mcp.config import ClientConfig, check_auth_header, redact_endpoint, validate_endpoint

__all__ = [
    "NotSent",
    "OperatorClient",
    "OperatorFailed",
    "OutcomeUnknown",
    "ProbableIntermediary",
    "RedirectRefused",
    "TransportError",
    "make_ssl_context",
    "read_bounded",
]

_CHUNK = 64 * 1024


class TransportError(SaihmError):
    """A call that produced no operator result. ``outcome`` says what may have happened."""

    outcome: ClassVar[str] = "unknown"
    http_status: int | None = None
    error_code: str | None = None


class NotSent(TransportError):
    """Nothing reached the operator: the connection or TLS handshake failed."""

    outcome = "not_sent"
    code = "not_sent"


class OperatorFailed(TransportError):
    """The endpoint answered with a failure status (saihm-protocol "Request and response")."""

    outcome = "failed"
    code = "failed"

    def __init__(self, message: str, http_status: int, error_code: str | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.error_code = error_code


class RedirectRefused(OperatorFailed):
    """A 3xx answer: a failure, not followed, and nothing re-sent."""


class OutcomeUnknown(TransportError):
    """No usable response arrived; the operator may or may not have acted."""

    outcome = "unknown"
    code = "outcome_unknown"


class ProbableIntermediary(OutcomeUnknown):
    """A 2xx response whose body is not JSON: probably a proxy or captive portal."""


def make_ssl_context(ca_file: str | None) -> ssl.SSLContext:
    """A verifying TLS context: the system trust store, or only the CAs in ``ca_file``.

    Certificate and host name validation are always on (saihm-protocol "Transport
    requirements"); Python's default context also refuses TLS below 1.2.
    """
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError, ValueError) as err:
        raise NotSent("SAIHM_CA_FILE could not be loaded as a CA bundle") from err


async def read_bounded(content: aiohttp.StreamReader, limit: int) -> bytes:
    """Read a body of at most ``limit`` bytes, counting while reading (chunked bodies included).

    Raises :class:`OutcomeUnknown` as soon as more than ``limit`` bytes have arrived.
    """
    body = bytearray()
    async for chunk in content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > limit:
            raise OutcomeUnknown(
                f"the response exceeded {limit} bytes and was abandoned; "
                "the operator may or may not have acted"
            )
    return bytes(body)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_json(body: bytes) -> Any:
    """Strict JSON (UTF-8, no NaN or Infinity); ``ValueError`` otherwise."""
    return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)


def _error_code(body: bytes) -> str | None:
    """The ``error`` member of a failure body when it is a printable identifier, else ``None``."""
    try:
        parsed = _parse_json(body)
    except (ValueError, RecursionError):
        return None
    return result_identifier(parsed.get("error")) if isinstance(parsed, dict) else None


class OperatorClient:
    """Sends tool calls to one operator endpoint and returns the parsed JSON result.

    It also remembers the caller's holderId once saihm_status reported it (``caller_id``),
    which saihm_recall needs to mark cells of other holders (conformance item 9).
    """

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.caller_id: str | None = None

    @property
    def endpoint_for_display(self) -> str:
        """The endpoint as it may appear in any text: ``scheme://host[:port]/path``."""
        return redact_endpoint(self.config.endpoint_url)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """POST ``{"method", "params"}`` and return the 2xx JSON body.

        Raises :class:`~saihm.mcp.config.ConfigError` before any connection for a refused
        endpoint or credential, and a :class:`TransportError` for every other failure.
        """
        url = validate_endpoint(self.config.endpoint_url)
        auth = check_auth_header(self.config.auth_header)
        ssl_context = make_ssl_context(self.config.ca_file)
        body = json.dumps({"method": method, "params": params}).encode("utf-8")
        headers = {"Content-Type": "application/json", "Authorization": auth}
        where = self.endpoint_for_display
        seconds = self.config.timeout_seconds
        try:
            async with asyncio.timeout(seconds):
                return await self._post(url, body, headers, ssl_context)
        except TransportError:
            raise
        except TimeoutError as err:
            raise OutcomeUnknown(
                f"no complete response from {where} within {seconds:g} s; "
                "the operator may or may not have acted"
            ) from err
        except aiohttp.ClientConnectorCertificateError as err:
            raise NotSent(f"the TLS certificate of {where} did not validate; nothing sent") from err
        except aiohttp.ClientSSLError as err:
            raise NotSent(f"the TLS handshake with {where} failed; nothing sent") from err
        except aiohttp.ClientConnectorError as err:
            raise NotSent(f"could not connect to {where}; nothing sent") from err
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as err:
            raise OutcomeUnknown(
                f"the connection to {where} closed before a complete response; "
                "the operator may or may not have acted"
            ) from err
        except (aiohttp.ClientError, OSError, ValueError, UnicodeError) as err:
            # The library's own text may quote the URL or a header; only its type is shown.
            raise OutcomeUnknown(
                f"HTTP error ({type(err).__name__}) talking to {where}; "
                "the operator may or may not have acted"
            ) from err

    async def _post(
        self, url: str, body: bytes, headers: dict[str, str], ssl_context: ssl.SSLContext
    ) -> Any:
        limit = self.config.max_response_bytes
        timeout = aiohttp.ClientTimeout(total=self.config.timeout_seconds)
        connector = aiohttp.TCPConnector(ssl=ssl_context)
        async with (
            aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False) as session,
            session.post(url, data=body, headers=headers, allow_redirects=False) as resp,
        ):
            status = resp.status
            reason = printable(resp.reason)
            shown = f"HTTP {status}" + (f" {reason}" if reason else "")
            if 300 <= status < 400:
                raise RedirectRefused(
                    f"{shown}: the endpoint answered with a redirect, which is a failure; "
                    "it was not followed and nothing was re-sent",
                    status,
                )
            if resp.content_length is not None and resp.content_length > limit:
                if not 200 <= status < 300:
                    raise OperatorFailed(f"{shown}: the operator reported a failure", status)
                raise OutcomeUnknown(
                    f"{shown}: the response announced more than {limit} bytes and was not read; "
                    "the operator may or may not have acted"
                )
            if not 200 <= status < 300:
                try:
                    code = _error_code(await read_bounded(resp.content, limit))
                except OutcomeUnknown:
                    code = None
                raise OperatorFailed(f"{shown}: the operator reported a failure", status, code)
            raw = await read_bounded(resp.content, limit)
        try:
            return _parse_json(raw)
        except (ValueError, RecursionError) as err:
            excerpt = normalise_excerpt(raw.decode("utf-8", errors="replace"))
            quoted = f' (begins: "{excerpt}")' if excerpt else ""
            raise ProbableIntermediary(
                f"{shown} with a body that is not JSON{quoted}: probably a proxy or captive "
                "portal, not the operator; the operator may or may not have acted"
            ) from err
