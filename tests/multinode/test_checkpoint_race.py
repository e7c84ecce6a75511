"""Two nodes signing a checkpoint of one size at once (saihm/store.py ``checkpoint_now``).

Both read the same tree size and sign, with different timestamps, so their notes differ. The
first stored wins (the store writes a checkpoint only where none is), and the other node then
returns and publishes the stored note, not its own: readers of either node never see two
different checkpoints of one size.
"""

from __future__ import annotations

import os
from pathlib import Path

from saihm.compose import initialise
from saihm.config import Config
from saihm.events import CapabilityScope
from saihm.operator import Operator
from saihm.protocol import call as binding_call
from saihm.store import Store


def test_a_node_that_loses_the_race_returns_the_stored_checkpoint(
    tmp_path: Path, postgres_location: str
) -> None:
    config = Config.for_data(tmp_path / "data", store=postgres_location, checkpoint_interval=3600)
    authority = initialise(config)
    first = Store(config, clock=lambda: 1_000_000.0)
    second = Store(config, clock=lambda: 2_000_000.0)
    try:
        operator = Operator(first, config)
        holder = operator.admin.create_holder()
        token = authority.issue(holder, os.urandom(32), CapabilityScope(), 3600).to_token()
        binding_call(operator, token, "saihm_remember", {"content": "one"})
        sign = second.log_keys.sign
        won: list[bytes] = []
        own: list[bytes] = []

        def slow_sign(checkpoint, *, timestamp=None):  # the other node stores first, meanwhile
            won.append(first.checkpoint_now())
            own.append(sign(checkpoint, timestamp=timestamp))
            return own[0]

        second.log_keys.sign = slow_sign  # type: ignore[method-assign]
        returned = second.checkpoint_now()
        assert own and own[0] != won[0], "the two nodes signed different notes of one size"
        assert returned == won[0]
        assert first.latest_checkpoint() == second.latest_checkpoint() == won[0]
    finally:
        second.close()
        first.close()
