"""The storage interface's contract (saihm/storage/base.py), pinned on every driver.

Each test runs once per driver (``lmdb``, ``postgresql``); "another process" is a real second
process (``_child.py``) on the same storage.
"""

from __future__ import annotations

import signal
import threading

import pytest

from saihm.storage import MAX_KEY, Storage, StorageError
from saihm.storage.base import prefetch
from tests.storage.conftest import NS, Opener, child, run_child


def put(storage: Storage, key: bytes, value: bytes, ns: bytes = b"main") -> None:
    with storage.write() as txn:
        txn.put(key, value, db=storage.namespace(ns))


def get(storage: Storage, key: bytes, ns: bytes = b"main") -> bytes | None:
    with storage.read() as snap:
        return snap.get(key, db=storage.namespace(ns))


def test_kind_and_location(storage: Storage, driver: str, location: str) -> None:
    assert storage.kind == driver
    assert tuple(storage.namespaces) == NS
    assert storage.namespace(b"main").name == b"main"
    with pytest.raises(KeyError):
        storage.namespace(b"undeclared")


def test_a_snapshot_does_not_see_a_commit_made_after_it_began(
    storage: Storage, location: str
) -> None:
    """The interface: "every read in it sees the state of one committed moment, unchanged
    by writes committed after it began, in this process or another"."""
    put(storage, b"k", b"1")
    main = storage.namespace(b"main")
    with storage.read() as early, storage.read() as touched:
        # ``early`` has not read anything yet: its moment is still when it began.
        assert touched.get(b"k", db=main) == b"1"
        run_child(location, "put", b"k".hex(), b"2".hex())
        run_child(location, "put", b"new".hex(), b"x".hex())
        for snap in (early, touched):
            assert snap.get(b"k", db=main) == b"1"
            assert snap.get(b"new", db=main) is None
            assert [k for k, _ in snap.scan(main)] == [b"k"]
            assert snap.count(main) == 1
    with storage.read() as later:
        assert later.get(b"k", db=main) == b"2"
        assert later.get(b"new", db=main) == b"x"


def test_a_write_is_invisible_until_it_commits(storage: Storage, location: str) -> None:
    main = storage.namespace(b"main")
    with storage.write() as txn:
        txn.put(b"k", b"v", db=main)
        assert txn.get(b"k", db=main) == b"v"  # it sees its own writes
        assert get(storage, b"k") is None  # another snapshot, this process
        assert run_child(location, "get", b"k".hex()).strip() == "-"  # another process
    assert get(storage, b"k") == b"v"
    assert run_child(location, "get", b"k".hex()).strip() == b"v".hex()


def test_an_exception_in_the_write_transaction_writes_nothing(storage: Storage) -> None:
    main, other = storage.namespace(b"main"), storage.namespace(b"other")
    put(storage, b"keep", b"1")
    with pytest.raises(RuntimeError, match="boom"), storage.write() as txn:
        txn.put(b"a", b"1", db=main)
        txn.put_many([(b"b", b"2"), (b"c", b"3")], db=other)
        txn.delete(b"keep", db=main)
        txn.clear(other)
        txn.put(b"d", b"4", db=other)
        raise RuntimeError("boom")
    with storage.read() as snap:
        assert list(snap.scan(main)) == [(b"keep", b"1")]
        assert list(snap.scan(other)) == []
    # The storage is usable afterwards.
    put(storage, b"after", b"ok")
    assert get(storage, b"after") == b"ok"


def test_abort_and_close_write_nothing(storage: Storage) -> None:
    main = storage.namespace(b"main")
    txn = storage.write()
    txn.put(b"a", b"1", db=main)
    txn.abort()
    txn.abort()  # idempotent
    txn = storage.write()
    txn.put(b"b", b"1", db=main)
    txn.close()
    txn = storage.write()
    txn.put(b"c", b"1", db=main)
    txn.commit()
    with storage.read() as snap:
        assert [k for k, _ in snap.scan(main)] == [b"c"]


def test_kill_9_of_the_writer_leaves_nothing_and_the_next_writer_proceeds(
    storage: Storage, location: str
) -> None:
    """A process killed while it holds the write transaction: nothing of it is written,
    and the next writer (here, this process) gets the transaction."""
    proc = child(location, "hold", b"half".hex())
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "holding"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    done = threading.Event()

    def write() -> None:
        put(storage, b"next", b"ok")
        done.set()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    assert done.wait(timeout=60), "the next writer never got the write transaction"
    assert get(storage, b"half") is None
    assert get(storage, b"next") == b"ok"


def test_a_second_writer_waits_for_the_first(storage: Storage, location: str) -> None:
    """The interface: "at most one is open at a time across every process": a writer that
    begins while another process holds the transaction sees that process's commit when it
    gets its turn."""
    proc = child(location, "hold-until-line", b"first".hex())
    assert proc.stdout is not None and proc.stdin is not None
    try:
        assert proc.stdout.readline().strip() == "holding"
        seen: list[bytes | None] = []
        begun = threading.Event()

        def second() -> None:
            begun.set()
            with storage.write() as txn:
                seen.append(txn.get(b"first", db=storage.namespace(b"main")))

        thread = threading.Thread(target=second, daemon=True)
        thread.start()
        assert begun.wait(timeout=10)
        proc.stdin.write("commit\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
        thread.join(timeout=60)
        assert not thread.is_alive()
        assert seen == [b"held"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("rounds", [40])
def test_two_processes_incrementing_lose_no_update(
    storage: Storage, location: str, rounds: int
) -> None:
    """Two processes doing N read-increment-write transactions each leave 2N."""
    procs = [child(location, "increment", str(rounds)) for _ in range(2)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert get(storage, b"counter") == str(2 * rounds).encode()


def test_put_without_overwrite_keeps_the_first_value(storage: Storage) -> None:
    main = storage.namespace(b"main")
    with storage.write() as txn:
        assert txn.put(b"k", b"first", db=main, overwrite=False) is True
        assert txn.put(b"k", b"second", db=main, overwrite=False) is False
        assert txn.get(b"k", db=main) == b"first"
        assert txn.put(b"k", b"third", db=main) is True
    assert get(storage, b"k") == b"third"
    with storage.write() as txn:
        assert txn.put(b"k", b"fourth", db=main, overwrite=False) is False
    assert get(storage, b"k") == b"third"


def test_delete_says_whether_the_key_was_there(storage: Storage) -> None:
    main = storage.namespace(b"main")
    put(storage, b"k", b"v")
    with storage.write() as txn:
        assert txn.delete(b"k", db=main) is True
        assert txn.delete(b"k", db=main) is False
        assert txn.get(b"k", db=main) is None
    assert get(storage, b"k") is None


def test_put_many_overwrites_and_the_last_value_of_a_key_wins(storage: Storage) -> None:
    main = storage.namespace(b"main")
    put(storage, b"b", b"old")
    with storage.write() as txn:
        txn.put_many([(b"a", b"1"), (b"b", b"2"), (b"a", b"3")], db=main)
        txn.put_many(iter([(b"c", b"4")]), db=main)  # any iterable
        txn.put_many([], db=main)
    with storage.read() as snap:
        assert list(snap.scan(main)) == [(b"a", b"3"), (b"b", b"2"), (b"c", b"4")]


def test_put_many_large_batches(storage: Storage) -> None:
    main = storage.namespace(b"main")
    pairs = [(i.to_bytes(4, "big"), i.to_bytes(4, "little") * 8) for i in range(5003)]
    with storage.write() as txn:
        txn.put_many(pairs[:2500], db=main, append=True)
        txn.put_many(pairs[2500:], db=main, append=True)
    with storage.read() as snap:
        assert snap.count(main) == len(pairs)
        assert list(snap.scan(main)) == pairs
        assert list(snap.scan(main, reverse=True)) == pairs[::-1]


def test_put_many_append_keeps_its_promise(storage: Storage) -> None:
    main = storage.namespace(b"main")
    with storage.write() as txn:
        txn.put_many([(b"\x01", b"a"), (b"\x02", b"b")], db=main, append=True)
        txn.put_many([(b"\x03", b"c")], db=main, append=True)
    with storage.read() as snap:
        assert [k for k, _ in snap.scan(main)] == [b"\x01", b"\x02", b"\x03"]


@pytest.mark.parametrize(
    "batch",
    [
        [(b"\x05", b"x"), (b"\x04", b"y")],  # not ascending
        [(b"\x05", b"x"), (b"\x05", b"y")],  # not strictly ascending
        [(b"\x03", b"x")],  # equal to the greatest key present
        [(b"\x02\xff", b"x")],  # below it
        [(b"\x00", b"x"), (b"\x09", b"y")],  # starts below it
    ],
)
def test_put_many_append_broken_promise_is_a_storage_error(
    storage: Storage, batch: list[tuple[bytes, bytes]]
) -> None:
    main = storage.namespace(b"main")
    with storage.write() as txn:
        txn.put_many([(b"\x01", b"a"), (b"\x03", b"c")], db=main, append=True)
    with pytest.raises(StorageError), storage.write() as txn:
        txn.put_many(batch, db=main, append=True)
    with storage.read() as snap:
        assert list(snap.scan(main)) == [(b"\x01", b"a"), (b"\x03", b"c")]


def test_clear_empties_one_namespace_only(storage: Storage) -> None:
    main, other = storage.namespace(b"main"), storage.namespace(b"other")
    with storage.write() as txn:
        txn.put_many([(b"a", b"1"), (b"b", b"2")], db=main)
        txn.put(b"a", b"x", db=other)
    with storage.write() as txn:
        txn.clear(main)
        assert txn.count(main) == 0
        txn.put(b"z", b"after", db=main)
    with storage.read() as snap:
        assert list(snap.scan(main)) == [(b"z", b"after")]
        assert list(snap.scan(other)) == [(b"a", b"x")]


def test_namespaces_are_separate(storage: Storage) -> None:
    main, other = storage.namespace(b"main"), storage.namespace(b"other")
    with storage.write() as txn:
        txn.put(b"k", b"main", db=main)
        txn.put(b"k", b"other", db=other)
    with storage.read() as snap:
        assert snap.get(b"k", db=main) == b"main"
        assert snap.get(b"k", db=other) == b"other"
        assert snap.count(main) == snap.count(other) == 1


@pytest.mark.parametrize("size", [0, MAX_KEY + 1])
def test_a_key_outside_1_to_511_bytes_is_refused(storage: Storage, size: int) -> None:
    """The interface: "Keys are 1 to 511 bytes": a write of any other key is refused, and
    the storage stays usable."""
    main = storage.namespace(b"main")
    with storage.write() as txn:
        with pytest.raises(StorageError):
            txn.put(b"k" * size, b"v", db=main)
        with pytest.raises(StorageError):
            txn.put_many([(b"a", b"1"), (b"k" * size, b"v")], db=main)
        txn.put(b"k" * MAX_KEY, b"longest", db=main)
        txn.put(b"\x00", b"shortest", db=main)
    with storage.read() as snap:
        assert snap.get(b"k" * MAX_KEY, db=main) == b"longest"
        assert snap.get(b"\x00", db=main) == b"shortest"


def test_a_key_too_long_to_store_is_never_found(storage: Storage) -> None:
    main = storage.namespace(b"main")
    with storage.write() as txn:
        assert txn.get(b"k" * (MAX_KEY + 1), db=main) is None
        assert txn.delete(b"k" * (MAX_KEY + 1), db=main) is False


def test_values_of_any_content_round_trip(storage: Storage) -> None:
    main = storage.namespace(b"main")
    values = {b"empty": b"", b"zeros": b"\x00" * 1000, b"big": bytes(range(256)) * 4096}
    with storage.write() as txn:
        for key, value in values.items():
            txn.put(key, value, db=main)
    with storage.read() as snap:
        for key, value in values.items():
            assert snap.get(key, db=main) == value


def test_read_only_storage_refuses_writes(opener: Opener) -> None:
    writer = opener()
    put(writer, b"k", b"v")
    writer.close()  # LMDB opens an environment once per process
    reader = opener((*NS, b"never-written"), readonly=True)
    with pytest.raises(StorageError):
        reader.write()
    with reader.read() as snap:
        assert snap.get(b"k", db=reader.namespace(b"main")) == b"v"
        never = reader.namespace(b"never-written")
        assert snap.get(b"k", db=never) is None
        assert list(snap.scan(never)) == []
        assert snap.last(never) is None
        assert snap.count(never) == 0


def test_many_snapshots_at_once_in_threads(storage: Storage) -> None:
    main = storage.namespace(b"main")
    put(storage, b"k", b"1")
    results: list[bytes | None] = []
    snaps = [storage.read() for _ in range(6)]
    try:
        put(storage, b"k", b"2")

        def read(snap: object) -> None:
            results.append(snap.get(b"k", db=main))  # type: ignore[attr-defined]

        threads = [threading.Thread(target=read, args=(s,)) for s in snaps]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        for snap in snaps:
            snap.close()
            snap.close()  # idempotent
    assert results == [b"1"] * 6
    assert get(storage, b"k") == b"2"


def test_usage_counts_what_was_written(storage: Storage) -> None:
    before = storage.usage().used
    with storage.write() as txn:
        txn.put_many(
            [(i.to_bytes(4, "big"), bytes(2000)) for i in range(500)],
            db=storage.namespace(b"main"),
        )
    assert storage.usage().used > before


def test_close_is_idempotent(opener: Opener) -> None:
    """A second close is no error; a closed storage begins no transaction (a StorageError,
    not a crash or a silent success); what was committed before is there when reopened."""
    storage = opener()
    put(storage, b"kept", b"1")
    storage.close()
    storage.close()
    with pytest.raises(StorageError):
        storage.read()
    with pytest.raises(StorageError):
        storage.write()
    again = opener()
    assert get(again, b"kept") == b"1"


def test_a_snapshot_prefetch_answers_as_its_reads_would(storage: Storage, location: str) -> None:
    """``prefetch`` (saihm/storage/base.py) names keys and namespace ends a snapshot is about
    to read: whatever is named (present, absent, an empty namespace, a key too long to
    store), each later ``get`` and ``last`` answers as it would have without it, from the
    snapshot's moment, not from a commit made after the prefetch."""
    main, other = storage.namespace(b"main"), storage.namespace(b"other")
    put(storage, b"a", b"1")
    put(storage, b"b", b"2")
    keys = [(main, b"a"), (main, b"b"), (main, b"absent"), (other, b"a"), (main, b"x" * 600)]
    with storage.read() as plain:
        expected = [plain.get(k, db=db) for db, k in keys]
        ends = [plain.last(main), plain.last(other)]
    assert expected == [b"1", b"2", None, None, None]
    assert ends == [(b"b", b"2"), None]
    with storage.read() as snap:
        prefetch(snap, keys, [main, other])
        run_child(location, "put", b"a".hex(), b"changed".hex())
        run_child(location, "put", b"c".hex(), b"3".hex())
        assert [snap.get(k, db=db) for db, k in keys] == expected
        assert [snap.last(main), snap.last(other)] == ends
        # Reads of what was not named go to the snapshot as before.
        assert snap.get(b"c", db=main) is None
        assert snap.last(main, prefix=b"a") == (b"a", b"1")
    with storage.read() as later:
        prefetch(later, keys, [main])
        assert later.get(b"a", db=main) == b"changed"
        assert later.last(main) == (b"c", b"3")
