"""Scans against a model: a sorted dict of bytes, queried by start/stop/prefix/reverse.

The interface: "Keys order as unsigned bytes (memcmp), shorter first on a common prefix";
``scan`` yields ``start <= key < stop`` starting with ``prefix``, ascending or descending;
``last`` the greatest such key; ``count`` the number of keys. Keys are drawn mostly from
``0x00``, ``0x01``, ``0x7f``, ``0x80``, ``0xfe`` and ``0xff``, the bytes where a wrong order
or an off-by-one prefix bound shows.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saihm.storage import Storage

EDGE = st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF])
BYTE = st.one_of(EDGE, EDGE, st.integers(0, 255))
KEY = st.lists(BYTE, min_size=1, max_size=4).map(bytes)
BOUND = st.one_of(st.just(b""), st.lists(BYTE, min_size=1, max_size=3).map(bytes))
QUERY = st.tuples(BOUND, st.one_of(st.none(), BOUND), st.one_of(st.none(), BOUND), st.booleans())
SETTINGS = settings(
    max_examples=60,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def model_scan(
    model: dict[bytes, bytes],
    start: bytes,
    stop: bytes | None,
    prefix: bytes | None,
    reverse: bool,
) -> list[tuple[bytes, bytes]]:
    keys = sorted(
        k
        for k in model
        if k >= start and (stop is None or k < stop) and (prefix is None or k.startswith(prefix))
    )
    if reverse:
        keys.reverse()
    return [(k, model[k]) for k in keys]


def check(snap: object, storage: Storage, model: dict[bytes, bytes], queries: list[tuple]) -> None:
    main = storage.namespace(b"main")
    assert snap.count(main) == len(model)  # type: ignore[attr-defined]
    assert list(snap.scan(main)) == model_scan(model, b"", None, None, False)  # type: ignore[attr-defined]
    for start, stop, prefix, reverse in queries:
        got = list(snap.scan(main, start, stop, prefix=prefix, reverse=reverse))  # type: ignore[attr-defined]
        assert got == model_scan(model, start, stop, prefix, reverse), (start, stop, prefix)
        expected = model_scan(model, b"", None, prefix, True)
        assert snap.last(main, prefix=prefix) == (expected[0] if expected else None)  # type: ignore[attr-defined]


@SETTINGS
@given(
    initial=st.dictionaries(KEY, st.binary(max_size=8), max_size=60),
    changes=st.lists(st.tuples(KEY, st.one_of(st.none(), st.binary(max_size=8))), max_size=20),
    queries=st.lists(QUERY, min_size=1, max_size=6),
)
def test_scans_match_a_sorted_dict(
    storage: Storage,
    initial: dict[bytes, bytes],
    changes: list[tuple[bytes, bytes | None]],
    queries: list[tuple],
) -> None:
    """Inside the write transaction (its own uncommitted puts and deletes included) and in a
    snapshot after it commits, every scan, ``last`` and ``count`` agrees with the model."""
    main = storage.namespace(b"main")
    model = dict(initial)
    with storage.write() as txn:
        txn.clear(main)
        txn.put_many(list(initial.items()), db=main)
        for key, value in changes:
            if value is None:
                assert txn.delete(key, db=main) is (key in model)
                model.pop(key, None)
            else:
                txn.put(key, value, db=main)
                model[key] = value
        check(txn, storage, model, queries)
    with storage.read() as snap:
        check(snap, storage, model, queries)


def test_scans_across_many_pages(storage: Storage) -> None:
    """Enough keys that a driver reading in pages must resume from the middle, in both
    directions, with bounds and prefixes that fall inside a page."""
    main = storage.namespace(b"main")
    model = {
        bytes([a, b]) + (b"\x00" * c): bytes([a, b, c])
        for a in (0x00, 0x01, 0xFE, 0xFF)
        for b in range(0, 256, 3)
        for c in range(3)
    }
    with storage.write() as txn:
        txn.put_many(sorted(model.items()), db=main, append=True)
    queries = [
        (b"", None, None, False),
        (b"", None, None, True),
        (b"\x01", b"\xfe\x80", None, False),
        (b"\x01", b"\xfe\x80", None, True),
        (b"", None, b"\xff", False),
        (b"", None, b"\xff", True),
        (b"\x00\x10", None, b"\x00", True),
        (b"", b"\xff\x30\x00", b"\xff", False),
        (b"\xff\xff", None, None, False),
    ]
    with storage.read() as snap:
        check(snap, storage, model, queries)


def test_a_scan_resumes_correctly_while_the_write_transaction_changes_the_range(
    storage: Storage,
) -> None:
    """Deleting each key as it is scanned (the store's clean-up pattern) visits every key."""
    main = storage.namespace(b"main")
    keys = [i.to_bytes(2, "big") for i in range(700)]
    with storage.write() as txn:
        txn.put_many([(k, b"v") for k in keys], db=main, append=True)
    with storage.write() as txn:
        seen = []
        for key, _ in txn.scan(main):
            seen.append(key)
            txn.delete(key, db=main)
        assert seen == keys
        assert txn.count(main) == 0
