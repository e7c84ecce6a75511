"""What a write costs on PostgreSQL, counted (docs/scaling.md "How throughput grows with
nodes"): round trips made while the write lock is held bound every node's commits together,
so a remember's write transaction must make few of them whatever the load."""

from __future__ import annotations

import secrets
import threading
from pathlib import Path

import psycopg
import pytest

from saihm.authority import Authority
from saihm.compose import initialise
from saihm.config import Config
from saihm.errors import Unavailable
from saihm.events import CapabilityScope
from saihm.operator import Operator
from saihm.protocol import call as binding_call
from saihm.storage.postgres import PostgresStorage
from saihm.store import Change, Store

#: Round trips under the lock of one remember's write transaction: the one that takes the
#: lock (its answer, with every read the previous transactions taught it to prefetch and the
#: cell's new wrapped-DEK key, which the group commit names in advance). The COMMIT's request
#: travels with the writes, and is counted with it.
LOCKED_ROUND_TRIPS = 1
#: Round trips of one remember in all, as the driver counts them: the authentication's read
#: snapshot (its BEGIN, then one prefetch of every key it reads: the holder, the revocation
#: count, the tree size) and the write transaction's two (the lock, the COMMIT). The cache
#: takes the batch's own leaves after the commit, with no read.
ROUND_TRIPS = 4


def spent(storage: PostgresStorage, before: dict[str, float]) -> dict[str, float]:
    after = storage.figures()
    return {name: after[name] - before[name] for name in after}


def test_one_remember_makes_one_round_trip_under_the_write_lock(
    tmp_path: Path, postgres_location: str
) -> None:
    data = tmp_path / "data"
    initialise(Config.for_data(data, store=postgres_location))
    config = Config.for_data(data, store=postgres_location, checkpoint_interval=3600.0)
    operator = Operator(Store(config), config)
    try:
        storage = operator.store.env.storage
        assert isinstance(storage, PostgresStorage)
        authority = Authority.open(config.authority_dir)
        holder = operator.admin.create_holder()
        token = authority.issue(holder, secrets.token_bytes(32), CapabilityScope(), 86_400)
        for i in range(3):  # the first transactions teach the driver what a remember reads
            binding_call(operator, token.to_token(), "saihm_remember", {"content": f"warm {i}"})
        for i in range(5):
            before = storage.figures()
            binding_call(operator, token.to_token(), "saihm_remember", {"content": f"counted {i}"})
            cost = spent(storage, before)
            assert cost["write_transactions"] == 1
            assert cost["locked_round_trips"] <= LOCKED_ROUND_TRIPS, cost
            assert cost["round_trips"] <= ROUND_TRIPS, cost
            # Every write of the remember (cell, DEK, memo, projections, leaf, tiles,
            # statistics) goes as one INSERT with the COMMIT.
            assert cost["rows_written"] >= 10, cost
            assert cost["write_statements"] <= 10, cost
    finally:
        operator.store.close()


def test_a_batch_of_remembers_makes_one_round_trip_under_the_write_lock(
    tmp_path: Path, postgres_location: str
) -> None:
    """Under load the lock's round trips do not grow with the batch: three remembers signed
    at once share one write transaction, whose lock is held for one round trip (each new
    cell's wrapped-DEK key is read with the lock)."""
    data = tmp_path / "data"
    initialise(Config.for_data(data, store=postgres_location))
    config = Config.for_data(data, store=postgres_location, checkpoint_interval=3600.0)
    operator = Operator(Store(config), config)
    try:
        store = operator.store
        storage = store.env.storage
        assert isinstance(storage, PostgresStorage)
        authority = Authority.open(config.authority_dir)
        tokens = []
        for _ in range(3):
            holder = operator.admin.create_holder()
            cap = authority.issue(holder, secrets.token_bytes(32), CapabilityScope(), 86_400)
            tokens.append(cap.to_token())
        for i, token in enumerate(tokens):  # the first transactions teach the prefetch
            binding_call(operator, token, "saihm_remember", {"content": f"warm {i}"})
        # Each writer has signed (announced) before any queues: the first waits for the rest.
        store.commits.window = store.commits.signing_ttl = 3600.0
        all_signed = threading.Barrier(len(tokens), timeout=60)
        commit = store.commits.commit

        def commit_once_all_signed(change: Change) -> Change:
            all_signed.wait()
            return commit(change)

        store.commits.commit = commit_once_all_signed  # type: ignore[method-assign]
        before = storage.figures()
        answers: list[object] = []

        def remember(token: str) -> None:
            params = {"content": "in a batch"}
            answers.append(binding_call(operator, token, "saihm_remember", params))

        threads = [threading.Thread(target=remember, args=(t,)) for t in tokens]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(answers) == len(tokens)
        cost = spent(storage, before)
        assert cost["write_transactions"] == 1, cost
        assert cost["locked_round_trips"] == LOCKED_ROUND_TRIPS, cost
    finally:
        operator.store.close()


def test_a_remember_whose_commit_fails_is_refused_and_leaves_nothing(
    tmp_path: Path, postgres_location: str
) -> None:
    """The writes travel with the COMMIT, so the server refuses them there: the remember is
    answered ``operator_storage_unavailable`` (saihm-protocol "Order of effect and receipt":
    the group commit looks its receipts up first), nothing of it is stored, and the next
    remember commits at the next leaf index."""
    data = tmp_path / "data"
    initialise(Config.for_data(data, store=postgres_location))
    config = Config.for_data(data, store=postgres_location, checkpoint_interval=3600.0)
    operator = Operator(Store(config), config)
    try:
        authority = Authority.open(config.authority_dir)
        holder = operator.admin.create_holder()
        token = authority.issue(holder, secrets.token_bytes(32), CapabilityScope(), 86_400)
        binding_call(operator, token.to_token(), "saihm_remember", {"content": "before"})
        size = operator.store.size()
        with psycopg.connect(postgres_location, autocommit=True) as conn:
            conn.execute(
                """
                CREATE FUNCTION saihm_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
                CREATE TRIGGER saihm_test_refuse BEFORE INSERT OR UPDATE ON saihm_kv
                  FOR EACH STATEMENT EXECUTE FUNCTION saihm_test_refuse();
                """
            )
            with pytest.raises(Unavailable) as refused:
                binding_call(operator, token.to_token(), "saihm_remember", {"content": "lost"})
            assert refused.value.code == "operator_storage_unavailable"
            assert operator.store.size() == size
            conn.execute("DROP TRIGGER saihm_test_refuse ON saihm_kv")
        binding_call(operator, token.to_token(), "saihm_remember", {"content": "after"})
        assert operator.store.size() == size + 1
        cells = binding_call(operator, token.to_token(), "saihm_recall", {})
        texts = sorted(c["plaintext"] for c in cells)  # type: ignore[attr-defined, union-attr]
        assert texts == ["after", "before"]
    finally:
        operator.store.close()
