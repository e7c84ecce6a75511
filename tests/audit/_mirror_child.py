"""Child process for the mirror's kill -9 test: run ``saihm mirror`` and SIGKILL itself.

argv: URL DIR N. The child counts the mirror's durable steps (every file it writes through
``TileDir`` and every state write through ``MirrorState.set_meta``) and sends itself SIGKILL
just before step N, so nothing is flushed or closed: exactly a kill -9 at that point. With N = 0
it runs to the end and prints the number of steps it took.
"""

from __future__ import annotations

import os
import signal
import sys

from saihm.audit import mirror as mirror_module
from saihm.audit.mirrorstate import MirrorState
from saihm.audit.publish import TileDir


def main() -> None:
    url, directory, stop = sys.argv[1], sys.argv[2], int(sys.argv[3])
    steps = 0

    def counted(original):
        def step(*args, **kwargs):
            nonlocal steps
            steps += 1
            if steps == stop:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)

        return step

    TileDir.write = counted(TileDir.write)  # type: ignore[method-assign]
    TileDir.write_checkpoint = counted(TileDir.write_checkpoint)  # type: ignore[method-assign]
    MirrorState.set_meta = counted(MirrorState.set_meta)  # type: ignore[method-assign]
    outcome = mirror_module.mirror(url, directory)
    print(
        steps
        if outcome.ok
        else f"alarm {[str(a) for a in outcome.alarms]} {outcome.report.failures}"
    )


if __name__ == "__main__":
    main()
