"""Benchmarks behind ``saihm bench NAME``.

Each module ``saihm.bench.<name>`` offers ``run(args: list[str]) -> Iterator[dict]`` yielding one
JSON-ready figure per item: ``{"bench", "figure", "value", "unit", "peer", "peer_value",
"ratio", ...}``. Figures are ratios against a peer or a floor measured in the same run.
"""

NAMES = ("translog", "crypto", "store", "http", "verify", "witness", "recall")
