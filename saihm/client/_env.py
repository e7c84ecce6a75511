"""The client's settings from the environment, as ``saihm-mcp`` and the host commands read them.

``SAIHM_ENDPOINT_URL``, ``SAIHM_AUTH_HEADER``, ``SAIHM_TIMEOUT_SECONDS`` (default 30),
``SAIHM_CA_FILE`` and ``SAIHM_TLS_PIN_SHA256``. Nothing is read at import time; the endpoint,
credential and pin are checked where they are used, so that a tool can report the problem.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from saihm.client._transport import DEFAULT_TIMEOUT_SECONDS
from saihm.client.errors import ClientError

__all__ = ["EnvSettings", "read_env"]


@dataclass(frozen=True)
class EnvSettings:
    """The settings; ``endpoint_url`` and ``auth_header`` are secrets (hidden from ``repr``)."""

    endpoint_url: str | None = field(repr=False)
    auth_header: str | None = field(repr=False)
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    ca_file: str | None = None
    tls_pin_sha256: str | None = None


def read_env(env: Mapping[str, str]) -> EnvSettings:
    """Read the settings from ``env``; a config :class:`ClientError` for a timeout that is not a
    positive finite number of seconds (its value is not quoted)."""
    raw_timeout = env.get("SAIHM_TIMEOUT_SECONDS", "").strip()
    timeout = DEFAULT_TIMEOUT_SECONDS
    if raw_timeout:
        try:
            timeout = float(raw_timeout)
        except ValueError as err:
            raise ClientError("SAIHM_TIMEOUT_SECONDS is not a number", kind="config") from err
        if not math.isfinite(timeout) or timeout <= 0:
            raise ClientError(
                "SAIHM_TIMEOUT_SECONDS must be a positive number of seconds", kind="config"
            )
    return EnvSettings(
        endpoint_url=env.get("SAIHM_ENDPOINT_URL") or None,
        auth_header=env.get("SAIHM_AUTH_HEADER") or None,
        timeout_seconds=timeout,
        ca_file=env.get("SAIHM_CA_FILE") or None,
        tls_pin_sha256=env.get("SAIHM_TLS_PIN_SHA256") or None,
    )
