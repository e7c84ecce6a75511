"""The HTTPS binding for the MCP client, over the client library's transport.

saihm-protocol "HTTPS binding" and "Transport requirements" are implemented once, in
:mod:`saihm.client._transport` (certificate validation and an optional pin, no redirects, a
timeout after which the outcome is unknown, a 16 MiB bound enforced while reading, error text
that never carries the endpoint's userinfo, query or fragment, the Authorization value, or
text from the HTTP library). This module turns each :class:`~saihm.client.ClientError` into
the :class:`TransportError` the tools report, keeping its message.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import urlsplit

from saihm.client._endpoint import parse_pin
from saihm.client._transport import Target, make_ssl_context, post
from saihm.client.errors import ClientError
from saihm.errors import SaihmError
from saihm.mcp.config import ClientConfig, ConfigError, check_auth_header, redact_endpoint
from saihm.mcp.config import validate_endpoint as _validate_endpoint

__all__ = [
    "NotSent",
    "OperatorClient",
    "OperatorFailed",
    "OutcomeUnknown",
    "ProbableIntermediary",
    "RedirectRefused",
    "TransportError",
]


class TransportError(SaihmError):
    """A call that produced no operator result. ``outcome`` says what may have happened."""

    outcome: ClassVar[str] = "unknown"
    http_status: int | None = None
    error_code: str | None = None
    #: The fix, when the client can tell it from its own configuration (it overrides the
    #: general advice for the status).
    advice: str | None = None


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


def _translate(err: ClientError) -> TransportError:
    """The tools' view of a client-library failure; the message is kept as written."""
    message = str(err)
    if err.kind == "redirect":
        return RedirectRefused(message, err.http_status or 0)
    if err.kind == "status":
        return OperatorFailed(message, err.http_status or 0, err.operator_code)
    if err.kind == "intermediary":
        return ProbableIntermediary(message)
    if err.outcome == "not_sent":
        return NotSent(message)
    return OutcomeUnknown(message)


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

    def _target(self) -> Target:
        url = _validate_endpoint(self.config.endpoint_url)
        auth = check_auth_header(self.config.auth_header)
        try:
            pin = parse_pin(self.config.tls_pin_sha256, "SAIHM_TLS_PIN_SHA256")
        except ClientError as err:
            raise ConfigError(str(err)) from err
        if pin is not None and not url.startswith("https:"):
            raise ConfigError("SAIHM_TLS_PIN_SHA256 needs an https endpoint")
        try:
            context = make_ssl_context(self.config.ca_file, "SAIHM_CA_FILE")
        except ClientError as err:
            raise NotSent(str(err)) from err
        return Target(
            url, auth, context, pin, self.config.timeout_seconds, self.config.max_response_bytes
        )

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """POST ``{"method", "params"}`` and return the 2xx JSON body.

        Raises :class:`~saihm.mcp.config.ConfigError` before any connection for a refused
        endpoint, credential or pin, and a :class:`TransportError` for every other failure.
        """
        target = self._target()
        try:
            return await post(target, method, params)
        except ClientError as err:
            failure = _translate(err)
            failure.advice = self._fix(failure, target)
            raise failure from err

    def _fix(self, failure: TransportError, target: Target) -> str | None:
        """The configuration mistake behind ``failure``, when the client can see it: a 404
        from an endpoint URL with a path (the binding is served at the operator's root), or
        a 401 for an Authorization value with no scheme (the "Bearer " prefix is missing)."""
        path = urlsplit(target.url).path
        if failure.http_status == 404 and path not in ("", "/"):
            return (
                f"the endpoint URL has a path ({path}), and the operator answered 404: the "
                "binding is served at the operator's root, so set SAIHM_ENDPOINT_URL to "
                "scheme://host[:port]/ without the path"
            )
        if failure.http_status == 401 and " " not in target.auth.strip():
            return (
                'SAIHM_AUTH_HEADER holds no "Bearer " prefix: it is the whole Authorization '
                'value, so set it to "Bearer <token>" (value not shown)'
            )
        return None
