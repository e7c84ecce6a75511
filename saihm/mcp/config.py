"""Client configuration from the environment, endpoint validation and endpoint redaction.

saihm-protocol "Transport requirements": https only (http only to 127.0.0.1 or localhost),
and no userinfo, query, fragment or unparsable endpoint in any error text. Nothing here runs
at import time; :func:`load_config` reads the mapping it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from saihm.client import _endpoint
from saihm.client._env import read_env
from saihm.client._transport import DEFAULT_TIMEOUT_SECONDS, MAX_RESPONSE_BYTES
from saihm.client.errors import ClientError
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

#: Characters of the report a tool returns to the agent, well inside common host limits;
#: the structured result always keeps everything (saihm/mcp/report.py).
DEFAULT_REPORT_BUDGET = 20_000
MIN_REPORT_BUDGET = 1_000


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
    tls_pin_sha256: str | None = None
    report_budget: int = DEFAULT_REPORT_BUDGET


def load_config(env: Mapping[str, str]) -> ClientConfig:
    """Read ``SAIHM_ENDPOINT_URL``, ``SAIHM_AUTH_HEADER``, ``SAIHM_TIMEOUT_SECONDS`` (default 30),
    ``SAIHM_CA_FILE`` and ``SAIHM_TLS_PIN_SHA256`` from ``env`` (the client library's
    :func:`~saihm.client._env.read_env`), and ``SAIHM_REPORT_BUDGET`` (characters, default
    20,000).

    The endpoint, credential and pin are validated per call (:func:`validate_endpoint`,
    :func:`check_auth_header`) so a tool can report the problem to the agent. Raises
    :class:`ConfigError` for a timeout that is not a positive finite number of seconds.
    """
    try:
        settings = read_env(env)
    except ClientError as err:
        raise ConfigError(str(err)) from err
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
        endpoint_url=settings.endpoint_url,
        auth_header=settings.auth_header,
        timeout_seconds=settings.timeout_seconds,
        ca_file=settings.ca_file,
        tls_pin_sha256=settings.tls_pin_sha256,
        report_budget=budget,
    )


def validate_endpoint(url: str | None) -> str:
    """The URL to POST to, or :class:`ConfigError` raised before any connection.

    Refuses a missing or unparsable endpoint, any scheme but https except http to the host
    names 127.0.0.1 or localhost, and userinfo (credentials belong in SAIHM_AUTH_HEADER). The
    fragment, never sent over HTTP, is dropped; the query is kept but never printed. The rule
    itself is the client library's (:func:`saihm.client._endpoint.validate_endpoint`).
    """
    try:
        return _endpoint.validate_endpoint(url, "SAIHM_ENDPOINT_URL", "SAIHM_AUTH_HEADER")
    except ClientError as err:
        raise ConfigError(str(err)) from err


def redact_endpoint(url: str | None) -> str:
    """``scheme://host[:port]/path`` of ``url``: no userinfo, query or fragment.

    Returns a fixed placeholder for a missing or unparsable URL, which is never quoted.
    """
    return _endpoint.redact_endpoint(url)


def check_auth_header(value: str | None) -> str:
    """The Authorization value to send verbatim, or :class:`ConfigError` that never quotes it.

    saihm-protocol "Credential handling": a value with CR, LF, NUL or any other character an
    HTTP library would reject (and quote in its error) is refused here instead.
    """
    try:
        return _endpoint.check_auth_header(value, "SAIHM_AUTH_HEADER")
    except ClientError as err:
        raise ConfigError(str(err)) from err
