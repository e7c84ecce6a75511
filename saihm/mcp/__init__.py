"""saihm.mcp: the custodial MCP client (eight tools, every client check).

It talks to any SAIHM operator over the protocol's HTTPS binding, holds no key material and
performs no cryptography beyond TLS (saihm-protocol "Client conformance" 2). Configuration:
``SAIHM_ENDPOINT_URL``, ``SAIHM_AUTH_HEADER``, ``SAIHM_TIMEOUT_SECONDS`` (default 30) and
``SAIHM_CA_FILE`` (optional CA bundle replacing the system trust store).
"""

from __future__ import annotations

import os
import sys

from saihm.mcp.config import ClientConfig, ConfigError, load_config
from saihm.mcp.server import build_mcp
from saihm.mcp.transport import OperatorClient

__all__ = ["ClientConfig", "OperatorClient", "build_mcp", "load_config", "main"]


def main() -> None:
    """Console script ``saihm-mcp``: read the environment and serve the tools over stdio.

    An endpoint or credential problem is reported by each tool call (so the agent sees it);
    only an unusable SAIHM_TIMEOUT_SECONDS stops the server from starting.
    """
    try:
        config = load_config(os.environ)
    except ConfigError as err:
        print(f"saihm-mcp: {err}", file=sys.stderr)
        raise SystemExit(2) from err
    build_mcp(OperatorClient(config)).run("stdio")
