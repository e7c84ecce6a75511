"""Endpoint, credential and pin validation, and endpoint redaction.

saihm-protocol "Transport requirements": https only (http only to the host names 127.0.0.1 or
localhost), and no userinfo, query, fragment or unparsable endpoint in any error text;
"Credential handling": the Authorization value is never quoted. ``what`` names the setting in
messages (``"endpoint"`` for :class:`~saihm.client.Client`, ``"SAIHM_ENDPOINT_URL"`` for the
MCP client and the host commands).
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit, urlunsplit

from saihm.client.errors import ClientError

__all__ = [
    "LOCAL_HOSTS",
    "check_auth_header",
    "parse_pin",
    "redact_endpoint",
    "validate_endpoint",
]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})
# Printable ASCII only: anything else is refused rather than percent-encoded behind our back.
_URL_CHARS = re.compile(r"[\x21-\x7e]+")
# An HTTP field value: visible ASCII, space and tab. CR, LF and NUL above all are refused.
_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]+")
_PIN = re.compile(r"(?:sha256[/:])?([0-9a-fA-F]{2}(?::?[0-9a-fA-F]{2}){31})")


def _config_error(message: str) -> ClientError:
    return ClientError(message, kind="config")


def _split(url: str, what: str) -> SplitResult:
    """``url`` split, or a config :class:`ClientError` without quoting it."""
    if _URL_CHARS.fullmatch(url) is None:
        raise _config_error(f"{what} does not parse as a URL (value not shown)")
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number in range
    except ValueError as err:
        raise _config_error(f"{what} does not parse as a URL (value not shown)") from err
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise _config_error(
            f"{what} must be an https URL with a host "
            "(http only to 127.0.0.1 or localhost); value not shown"
        )
    return parts


def validate_endpoint(
    url: str | None, what: str = "endpoint", auth_what: str = "auth_header"
) -> str:
    """The URL to POST to, or a config :class:`ClientError` raised before any connection.

    Refuses a missing or unparsable endpoint, any scheme but https except http to the host
    names 127.0.0.1 or localhost, and userinfo (credentials belong in the Authorization
    value). The fragment, never sent over HTTP, is dropped; the query is kept but never printed.
    """
    if not url:
        raise _config_error(f"{what} is not set")
    parts = _split(url, what)
    if parts.scheme == "http" and parts.hostname not in LOCAL_HOSTS:
        raise _config_error(
            "refused: the endpoint is not https (plain http is allowed only to 127.0.0.1 or "
            f"localhost): {redact_endpoint(url)}"
        )
    if parts.username is not None or parts.password is not None:
        raise _config_error(
            "refused: the endpoint URL carries userinfo; put the credential in "
            f"{auth_what} instead: {redact_endpoint(url)}"
        )
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", parts.query, ""))


def redact_endpoint(url: str | None) -> str:
    """``scheme://host[:port]/path`` of ``url``: no userinfo, query or fragment.

    Returns a fixed placeholder for a missing or unparsable URL, which is never quoted.
    """
    if not url:
        return "<endpoint not set>"
    try:
        parts = _split(url, "endpoint")
    except ClientError:
        return "<unparsable endpoint>"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}{parts.path or '/'}"


def check_auth_header(value: str | None, what: str = "auth_header") -> str:
    """The Authorization value to send verbatim, or a config :class:`ClientError` that never
    quotes it.

    saihm-protocol "Credential handling": a value with CR, LF, NUL or any other character an
    HTTP library would reject (and quote in its error) is refused here instead.
    """
    if not value:
        raise _config_error(f"{what} is not set")
    if not isinstance(value, str) or _HEADER_VALUE.fullmatch(value) is None:
        raise _config_error(
            f"{what} holds a character not allowed in an HTTP header "
            "(such as CR, LF or NUL); value not shown"
        )
    return value


def parse_pin(pin: str | None, what: str = "tls_pin_sha256") -> bytes | None:
    """The SHA-256 fingerprint of the pinned server certificate (DER), or ``None`` for no pin.

    Accepts 64 hex digits, optionally colon-separated as ``openssl x509 -fingerprint -sha256``
    prints them, optionally prefixed ``sha256/`` or ``sha256:``.
    """
    if pin is None or pin == "":
        return None
    match = _PIN.fullmatch(pin.strip()) if isinstance(pin, str) else None
    if match is None:
        raise _config_error(
            f"{what} must be the certificate's SHA-256 fingerprint: 64 hex digits (colons allowed)"
        )
    return bytes.fromhex(match.group(1).replace(":", ""))
