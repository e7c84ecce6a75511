"""A second process on the same storage, for the contract tests (``tests/storage``).

``python _child.py ACTION ARGS...`` with the location in ``SAIHM_CHILD_LOCATION``:

- ``put KEY VALUE``: commit one put (hex key and value).
- ``get KEY``: print the value (hex) or ``-`` from a new snapshot.
- ``increment N``: after a ``go`` line on stdin, N times read ``counter``, write it plus one.
- ``hold KEY``: begin the write transaction, put KEY, read, print ``holding``, and wait forever
  (the test kills it with SIGKILL).
- ``hold-until-line KEY``: the same, but commit when a line arrives on stdin.
"""

from __future__ import annotations

import os
import sys
import threading

from saihm.storage import open_storage

NS = (b"main", b"other")


def main(argv: list[str]) -> int:
    action, args = argv[0], argv[1:]
    # A reader opens read-only: LMDB opens a namespace for writing in a write transaction,
    # which would wait for the parent's.
    storage = open_storage(os.environ["SAIHM_CHILD_LOCATION"], NS, readonly=action == "get")
    main_ns = storage.namespace(b"main")
    if action == "put":
        with storage.write() as txn:
            txn.put(bytes.fromhex(args[0]), bytes.fromhex(args[1]), db=main_ns)
    elif action == "get":
        with storage.read() as snap:
            value = snap.get(bytes.fromhex(args[0]), db=main_ns)
        print("-" if value is None else value.hex(), flush=True)
    elif action == "increment":
        print("ready", flush=True)
        sys.stdin.readline()
        for _ in range(int(args[0])):
            with storage.write() as txn:
                raw = txn.get(b"counter", db=main_ns)
                count = int(raw) if raw else 0
                txn.put(b"counter", str(count + 1).encode(), db=main_ns)
    elif action in ("hold", "hold-until-line"):
        with storage.write() as txn:
            txn.put(bytes.fromhex(args[0]), b"held", db=main_ns)
            # A read: a driver may take the one-writer lock only with a transaction's first
            # read (base.py), and this transaction must hold it.
            txn.count(main_ns)
            print("holding", flush=True)
            if action == "hold":
                threading.Event().wait()
            sys.stdin.readline()
    else:
        raise SystemExit(f"unknown action {action}")
    storage.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
