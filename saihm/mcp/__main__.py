"""``python -m saihm.mcp``: the same as the ``saihm-mcp`` console script."""

from saihm.mcp import main

if __name__ == "__main__":
    main()
