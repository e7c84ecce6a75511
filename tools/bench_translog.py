"""Print `saihm bench translog` figures as JSON lines (a thin wrapper over saihm.bench.translog)."""

import json
import sys

from saihm.bench.translog import run

if __name__ == "__main__":
    for figure in run(sys.argv[1:]):
        print(json.dumps(figure), flush=True)
