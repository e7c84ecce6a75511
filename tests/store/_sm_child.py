"""Second process for the two-process state machine (tests/store/test_state_machine.py).

It opens its own Store and Operator (with their own cache of verified cells) on the data
directory named in argv[1] and serves requests read from stdin until "close": each request is a
length-prefixed pickle ``(op, now, args)`` from the test (a trusted local pipe), and each answer
is ``("ok", value)`` or ``("err", error class name, code)``.

- ``("call", now, (token, method, params))``: ``saihm.protocol.call``.
- ``("read", now, (token,))``: ``Store.read`` of everything the token may see, as
  ``[(cellId, plaintext, namespace)]``.
- ``("close", now, ())``.
"""

from __future__ import annotations

import pickle
import struct
import sys

from saihm.config import Config
from saihm.errors import SaihmError
from saihm.operator import Operator
from saihm.protocol import call as binding_call
from saihm.store import Store


def _recv() -> tuple:
    size = struct.unpack(">I", sys.stdin.buffer.read(4))[0]
    return pickle.loads(sys.stdin.buffer.read(size))


def _send(value: object) -> None:
    data = pickle.dumps(value)
    sys.stdout.buffer.write(struct.pack(">I", len(data)) + data)
    sys.stdout.buffer.flush()


def main() -> None:
    now = [0.0]
    config = Config.for_data(sys.argv[1])
    store = Store(config, clock=lambda: now[0])
    operator = Operator(store, config)
    _send(("ok", "ready"))
    try:
        while True:
            op, now[0], args = _recv()
            if op == "close":
                _send(("ok", None))
                return
            try:
                if op == "call":
                    token, method, params = args
                    _send(("ok", binding_call(operator, token, method, params)))
                elif op == "read":
                    cells = store.read(store.authenticate(args[0]))
                    out = [(c.cell.cell_id, c.payload.content, c.payload.namespace) for c in cells]
                    _send(("ok", out))
            except SaihmError as err:
                _send(("err", type(err).__name__, err.code))
    finally:
        store.close()


if __name__ == "__main__":
    main()
