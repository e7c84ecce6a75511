"""Child process for test_crash_recovery: run one operation and die at a chosen step.

argv[1] is JSON: {"data": data dir, "now": clock value, "token": bearer token,
"method": binding method, "params": {...}, "step": "signed" | "before_commit" |
"after_commit" | "checkpoint"}. At the step the process calls ``os._exit(137)``: no cleanup, no
LMDB close, like a kill. "signed" dies after the operator has signed the receipt, just before
:meth:`Store.commit`. If the step is never reached the child prints the result and exits 0.
"""

from __future__ import annotations

import json
import os
import sys

from saihm.config import Config
from saihm.operator import Operator
from saihm.protocol import call as binding_call
from saihm.store import Store

CRASH = 137


def main() -> None:
    job = json.loads(sys.argv[1])
    step = job["step"]

    def hook(at: str) -> None:
        if at == step:
            os._exit(CRASH)

    if step == "signed":
        original = Store.commit

        def commit(self: Store, change: object) -> object:
            os._exit(CRASH)
            return original(self, change)  # pragma: no cover

        Store.commit = commit  # type: ignore[method-assign]
    config = Config.for_data(job["data"])
    store = Store(config, clock=lambda: job["now"], fault_hook=hook)
    result = binding_call(Operator(store, config), job["token"], job["method"], job["params"])
    print(json.dumps(result))
    store.close()


if __name__ == "__main__":
    main()
