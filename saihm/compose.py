"""The composition root: builds the store and operator of one data directory from a Config."""

from __future__ import annotations

import dataclasses

from saihm.authority import Authority
from saihm.config import Config
from saihm.operator import Operator
from saihm.store import Store


def initialise(config: Config) -> Authority:
    """Create what a fresh data directory needs: KEK directory, authority, log keys (dev).

    In production the authority directory lives on another machine; this is the embedded
    default that ``saihm serve`` uses on first run.
    """
    authority = Authority.open(config.authority_dir, create=True)
    Store.initialise(config, authority.public_key)
    return authority


def open_operator(config: Config, *, checkpointer: bool = True) -> Operator:
    """The operator over the store of ``config.data_dir`` (created if new); with
    ``checkpointer`` (the default) the store's background jobs (checkpointer, KEK schedule)
    run until the operator is closed."""
    if not config.authority_public_key_file.exists():
        initialise(config)
    store = Store(config)
    if checkpointer:
        store.start_jobs()
    # A new data directory chose its origin while being created: pass the recorded one on.
    return Operator(store, dataclasses.replace(config, origin=store.origin))
