"""Benchmarks behind ``saihm bench NAME``.

Each module ``saihm.bench.<name>`` offers ``run(opts) -> Iterator[dict]`` yielding one
JSON-ready figure per item: ``{"bench", "figure", "value", "unit", "peer", "peer_value",
"ratio", ...}``. Figures are ratios against a peer or a floor measured in the same run.
``opts`` is the module's typed options (``CryptoOptions``, ``RecallOptions``, ...), parsed
from the command line by saihm/commands/bench.py.
"""

NAMES = ("translog", "crypto", "store", "http", "verify", "witness", "recall")
