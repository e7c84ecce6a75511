"""Write transactions against a model: random sequences of writes and reads, committed or
aborted, checked against a dict after every step.

The interface: a write transaction "sees its own writes; nothing of it is visible to anyone
else until it commits, and all of it is visible after"; leaving it by an exception writes
nothing. The PostgreSQL driver buffers writes and answers reads from the buffer, from what
it read before and from its prefetch (``saihm/storage/postgres.py``, "Round trips"), so every
read of a key written, deleted, cleared, read or named for prefetching before in the same
transaction is checked here, on every driver.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saihm.storage import Storage, WriteTxn
from saihm.storage.base import prefetch

KEY = st.sampled_from([b"a", b"ab", b"\x00", b"\xff", b"\xff\xff"])
VALUE = st.binary(min_size=0, max_size=3)
NS_NAME = st.sampled_from([b"main", b"other"])
STEP = st.one_of(
    st.tuples(st.just("put"), NS_NAME, KEY, VALUE),
    st.tuples(st.just("put_new"), NS_NAME, KEY, VALUE),
    st.tuples(st.just("delete"), NS_NAME, KEY),
    st.tuples(st.just("get"), NS_NAME, KEY),
    st.tuples(st.just("last"), NS_NAME),
    st.tuples(st.just("last_prefix"), NS_NAME, KEY),
    st.tuples(st.just("count"), NS_NAME),
    st.tuples(st.just("scan"), NS_NAME),
    st.tuples(st.just("put_many"), NS_NAME, st.lists(st.tuples(KEY, VALUE), max_size=3)),
    st.tuples(st.just("append"), NS_NAME, st.lists(VALUE, min_size=1, max_size=2)),
    st.tuples(st.just("clear"), NS_NAME),
    st.tuples(st.just("prefetch"), NS_NAME, st.lists(KEY, max_size=3)),
)
TRANSACTION = st.tuples(st.booleans(), st.lists(STEP, max_size=12))


def apply(
    txn: WriteTxn, storage: Storage, model: dict[bytes, dict[bytes, bytes]], step: tuple
) -> None:  # type: ignore[type-arg]
    """Run ``step`` on ``txn`` and on ``model``; assert that they agree."""
    kind, name = step[0], step[1]
    db = storage.namespace(name)
    m = model[name]
    if kind == "put":
        assert txn.put(step[2], step[3], db=db) is True
        m[step[2]] = step[3]
    elif kind == "put_new":
        assert txn.put(step[2], step[3], db=db, overwrite=False) is (step[2] not in m)
        m.setdefault(step[2], step[3])
    elif kind == "delete":
        assert txn.delete(step[2], db=db) is (step[2] in m)
        m.pop(step[2], None)
    elif kind == "get":
        assert txn.get(step[2], db=db) == m.get(step[2])
    elif kind == "last":
        assert txn.last(db) == (max(m.items()) if m else None)
    elif kind == "last_prefix":
        some = [(k, v) for k, v in m.items() if k.startswith(step[2])]
        assert txn.last(db, prefix=step[2]) == (max(some) if some else None)
    elif kind == "count":
        assert txn.count(db) == len(m)
    elif kind == "scan":
        assert list(txn.scan(db)) == sorted(m.items())
    elif kind == "put_many":
        txn.put_many(step[2], db=db)
        m.update(step[2])
    elif kind == "append":
        top = max(m) if m else b""
        pairs = [(top + b"\x01" * (i + 1), value) for i, value in enumerate(step[2])]
        txn.put_many(pairs, db=db, append=True)
        m.update(pairs)
    elif kind == "clear":
        txn.clear(db)
        m.clear()
    elif kind == "prefetch":  # a hint: it changes no answer, whenever it comes
        prefetch(txn, [(db, key) for key in step[2]], [db])


class Abort(Exception):
    """Leaves a write transaction by an exception: nothing of it is written."""


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(TRANSACTION, min_size=1, max_size=4))
def test_write_transactions_match_a_model(storage: Storage, transactions: list) -> None:  # type: ignore[type-arg]
    names = (b"main", b"other")
    with storage.write() as txn:  # each example starts from empty namespaces
        for name in names:
            txn.clear(storage.namespace(name))
    committed: dict[bytes, dict[bytes, bytes]] = {name: {} for name in names}
    for commit, steps in transactions:
        model = {name: dict(pairs) for name, pairs in committed.items()}
        try:
            with storage.write() as txn:
                for step in steps:
                    apply(txn, storage, model, step)
                if not commit:
                    raise Abort
        except Abort:
            pass
        else:
            committed = model
        with storage.read() as snap:
            for name in names:
                assert list(snap.scan(storage.namespace(name))) == sorted(committed[name].items())
