"""saihm.mcp: the custodial MCP client (eight tools, every client check)."""


def main() -> None:
    """Console script ``saihm-mcp``; replaced by the real stdio server."""
    raise SystemExit("saihm-mcp: not built yet")
