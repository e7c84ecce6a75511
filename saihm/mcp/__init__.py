"""saihm.mcp: the custodial MCP client (eight tools, every client check).

It talks to any SAIHM operator over the protocol's HTTPS binding, holds no key material and
performs no cryptography beyond TLS (saihm-protocol "Client conformance" 2). Configuration:
``SAIHM_ENDPOINT_URL``, ``SAIHM_AUTH_HEADER``, ``SAIHM_TIMEOUT_SECONDS`` (default 30),
``SAIHM_CA_FILE`` (optional CA bundle replacing the system trust store),
``SAIHM_TLS_PIN_SHA256`` (optional certificate pin) and ``SAIHM_REPORT_BUDGET`` (characters of
a recall report, default 20,000); ``--help`` lists them all.
"""

from __future__ import annotations

import argparse
import os
import sys

from saihm.mcp.config import ClientConfig, ConfigError, load_config
from saihm.mcp.server import build_mcp
from saihm.mcp.transport import OperatorClient

__all__ = ["ClientConfig", "OperatorClient", "build_mcp", "load_config", "main"]


HELP_EPILOG = """environment:
  SAIHM_ENDPOINT_URL     the operator's root URL, https://host[:port]/ (http only to
                         127.0.0.1 or localhost)
  SAIHM_AUTH_HEADER      the whole Authorization value, "Bearer <token>", with the token
                         from saihm holder create (never printed)
  SAIHM_TIMEOUT_SECONDS  seconds per call (default: 30)
  SAIHM_CA_FILE          a CA bundle replacing the system trust store (default: none)
  SAIHM_TLS_PIN_SHA256   the operator certificate's SHA-256 fingerprint, 64 hex digits
                         (default: no pin)
  SAIHM_REPORT_BUDGET    characters of a recall report given to the model, 1000 to
                         10000000 (default: 20000); the structured result keeps every cell

An MCP host starts this program and speaks MCP over its stdin and stdout (docs/mcp.md).
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``saihm-mcp [--help] [--version]``: both answer at once, without reading stdin."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("saihm")
    except PackageNotFoundError:
        installed = "unknown"
    parser = argparse.ArgumentParser(
        prog="saihm-mcp",
        description="The SAIHM custodial MCP client: the protocol's eight tools over stdio.",
        epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"saihm-mcp {installed}")
    return parser.parse_args(sys.argv[1:] if argv is None else argv)


def main(argv: list[str] | None = None) -> None:
    """Console script ``saihm-mcp``: read the environment and serve the tools over stdio.

    ``--help`` and ``--version`` print and exit before anything else. An endpoint or
    credential problem is reported by each tool call (so the agent sees it); only an unusable
    SAIHM_TIMEOUT_SECONDS stops the server from starting.
    """
    parse_args(argv)
    try:
        config = load_config(os.environ)
    except ConfigError as err:
        print(f"saihm-mcp: {err}", file=sys.stderr)
        raise SystemExit(2) from err
    build_mcp(OperatorClient(config)).run("stdio")
