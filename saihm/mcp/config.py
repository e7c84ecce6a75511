"""Client configuration from the environment, endpoint validation and endpoint redaction.

saihm-protocol "Transport requirements": https only (http only to 127.0.0.1 or localhost),
and no userinfo, query, fragment or unparsable endpoint in any error text. Nothing here runs
at import time; :func:`load_config` reads the mapping it is given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import SplitResult, urlsplit, urlunsplit

from saihm.mcp.checks import Refused

__all__ = [
    "DEFAULT_REPORT_BUDGET",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_RESPONSE_BYTES",
    "ClientConfig",
    "ConfigError",
    "check_auth_header",
    "load_config",
    "redact_endpoint",
    "validate_endpoint",
]

DEFAULT_TIMEOUT_SECONDS = 30.0
#: Characters of the report a tool returns to the agent, well inside common host limits;
#: the structured result always keeps everything (saihm/mcp/report.py).
DEFAULT_REPORT_BUDGET = 20_000
MIN_REPORT_BUDGET = 1_000
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
_LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# Printable ASCII only: anything else is refused rather than percent-encoded behind our back.
_URL_CHARS = re.compile(r"[\x21-\x7e]+")
# An HTTP field value: visible ASCII, space and tab. CR, LF and NUL above all are refused.
_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]+")


class ConfigError(Refused):
    """The configuration cannot be used; nothing is sent. The message quotes no value."""

    code = "bad_config"


@dataclass(frozen=True)
class ClientConfig:
    """What the client needs to reach one operator.

    ``endpoint_url`` and ``auth_header`` are secrets in the sense of the protocol's
    "Credential handling": they are never printed (``repr`` hides them).
    """

    endpoint_url: str | None = field(repr=False)
    auth_header: str | None = field(repr=False)
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    ca_file: str | None = None
    max_response_bytes: int = MAX_RESPONSE_BYTES
    report_budget: int = DEFAULT_REPORT_BUDGET


def load_config(env: Mapping[str, str]) -> ClientConfig:
    """Read ``SAIHM_ENDPOINT_URL``, ``SAIHM_AUTH_HEADER``, ``SAIHM_TIMEOUT_SECONDS`` (default 30),
    ``SAIHM_CA_FILE`` and ``SAIHM_REPORT_BUDGET`` (characters, default 20,000) from ``env``.

    The endpoint and credential are validated per call (:func:`validate_endpoint`,
    :func:`check_auth_header`) so a tool can report the problem to the agent. Raises
    :class:`ConfigError` for a timeout that is not a positive finite number of seconds.
    """
    raw_timeout = env.get("SAIHM_TIMEOUT_SECONDS", "").strip()
    timeout = DEFAULT_TIMEOUT_SECONDS
    if raw_timeout:
        try:
            timeout = float(raw_timeout)
        except ValueError as err:
            raise ConfigError("SAIHM_TIMEOUT_SECONDS is not a number") from err
        if not math.isfinite(timeout) or timeout <= 0:
            raise ConfigError("SAIHM_TIMEOUT_SECONDS must be a positive number of seconds")
    raw_budget = env.get("SAIHM_REPORT_BUDGET", "").strip()
    budget = DEFAULT_REPORT_BUDGET
    if raw_budget:
        if not raw_budget.isdigit() or not MIN_REPORT_BUDGET <= int(raw_budget) <= 10_000_000:
            raise ConfigError(
                f"SAIHM_REPORT_BUDGET must be a whole number of characters, "
                f"{MIN_REPORT_BUDGET} to 10000000"
            )
        budget = int(raw_budget)
    return ClientConfig(
        endpoint_url=env.get("SAIHM_ENDPOINT_URL") or None,
        auth_header=env.get("SAIHM_AUTH_HEADER") or None,
        timeout_seconds=timeout,
        ca_file=env.get("SAIHM_CA_FILE") or None,
        report_budget=budget,
    )


def _split(url: str) -> SplitResult:
    """``url`` split, or :class:`ConfigError` without quoting it."""
    if _URL_CHARS.fullmatch(url) is None:
        raise ConfigError("SAIHM_ENDPOINT_URL does not parse as a URL (value not shown)")
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number in range
    except ValueError as err:
        raise ConfigError("SAIHM_ENDPOINT_URL does not parse as a URL (value not shown)") from err
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(
            "SAIHM_ENDPOINT_URL must be an https URL with a host "
            "(http only to 127.0.0.1 or localhost); value not shown"
        )
    return parts


def validate_endpoint(url: str | None) -> str:
    """The URL to POST to, or :class:`ConfigError` raised before any connection.

    Refuses a missing or unparsable endpoint, any scheme but https except http to the host
    names 127.0.0.1 or localhost, and userinfo (credentials belong in SAIHM_AUTH_HEADER). The
    fragment, never sent over HTTP, is dropped; the query is kept but never printed.
    """
    if not url:
        raise ConfigError("SAIHM_ENDPOINT_URL is not set")
    parts = _split(url)
    if parts.scheme == "http" and parts.hostname not in _LOCAL_HOSTS:
        raise ConfigError(
            "refused: the endpoint is not https (plain http is allowed only to 127.0.0.1 or "
            f"localhost): {redact_endpoint(url)}"
        )
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            "refused: the endpoint URL carries userinfo; put the credential in "
            f"SAIHM_AUTH_HEADER instead: {redact_endpoint(url)}"
        )
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", parts.query, ""))


def redact_endpoint(url: str | None) -> str:
    """``scheme://host[:port]/path`` of ``url``: no userinfo, query or fragment.

    Returns a fixed placeholder for a missing or unparsable URL, which is never quoted.
    """
    if not url:
        return "<endpoint not set>"
    try:
        parts = _split(url)
    except ConfigError:
        return "<unparsable endpoint>"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}{parts.path or '/'}"


def check_auth_header(value: str | None) -> str:
    """The Authorization value to send verbatim, or :class:`ConfigError` that never quotes it.

    saihm-protocol "Credential handling": a value with CR, LF, NUL or any other character an
    HTTP library would reject (and quote in its error) is refused here instead.
    """
    if not value:
        raise ConfigError("SAIHM_AUTH_HEADER is not set")
    if _HEADER_VALUE.fullmatch(value) is None:
        raise ConfigError(
            "SAIHM_AUTH_HEADER holds a character not allowed in an HTTP header "
            "(such as CR, LF or NUL); value not shown"
        )
    return value
