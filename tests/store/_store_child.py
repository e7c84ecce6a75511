"""Child process for the rotation, schedule and storage tests: one job on a shared data directory.

argv[1] is JSON: {"data": dir, "now": clock value, "options": Config options, "job": name, ...}.

Jobs (each prints one JSON line when done):

- ``rotate`` {"count"}: ``count`` rotations via ``Store.rotate_kek`` (waiting for the lock);
- ``schedule`` {"go"}: wait until the file ``go`` exists, then one ``rotate_kek_if_due``;
- ``remember`` {"token", "count", "prefix"}: remember ``count`` cells; prints what was
  acknowledged and what was refused with ``operator_storage_unavailable``;
- ``crash_rotate`` {"step"}: one rotation, killed with SIGKILL at the fault step ``step``;
- ``pause_rotate`` {"release"}: one rotation that, once its generation is issued, writes the
  file ``release + ".paused"`` and waits until ``release`` exists.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from saihm.config import Config
from saihm.errors import SaihmError
from saihm.operator import Operator
from saihm.protocol import call as binding_call
from saihm.store import Store

DEADLINE = 120.0


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {path}")
        time.sleep(0.005)


def main() -> None:
    job = json.loads(sys.argv[1])
    name = job["job"]
    now = job["now"]

    def hook(step: str) -> None:
        if name == "crash_rotate" and step == job["step"]:
            os.kill(os.getpid(), signal.SIGKILL)
        if name == "pause_rotate" and step == "rotate.issued":
            release = Path(job["release"])
            Path(str(release) + ".paused").write_text("paused")
            _wait_for(release)

    config = Config.for_data(job["data"], **job.get("options", {}))
    store = Store(config, clock=lambda: now, fault_hook=hook)
    try:
        if name in ("rotate", "crash_rotate", "pause_rotate"):
            versions = [store.rotate_kek() for _ in range(job.get("count", 1))]
            print(json.dumps({"versions": versions}))
        elif name == "schedule":
            _wait_for(Path(job["go"]))
            print(json.dumps({"version": store.rotate_kek_if_due()}))
        elif name == "remember":
            operator = Operator(store, config)
            done, refused = [], []
            for i in range(job["count"]):
                content = f"{job['prefix']} {i}"
                try:
                    binding_call(operator, job["token"], "saihm_remember", {"content": content})
                except SaihmError as err:
                    if err.code != "operator_storage_unavailable":
                        raise
                    refused.append(content)
                else:
                    done.append(content)
            map_size = getattr(store.storage, "map_size", None)  # LMDB only
            print(json.dumps({"done": done, "refused": refused, "map": map_size}))
    finally:
        store.close()


if __name__ == "__main__":
    main()
