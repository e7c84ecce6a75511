"""A write that does not fit: ``StorageFull``, nothing of the transaction written, and
``grow()`` saying whether the same writes may be tried again.

LMDB is filled for real (a small map). PostgreSQL's disk cannot be filled safely on a shared
test machine, so its disk-full error (SQLSTATE 53100, what the server raises when it cannot
extend a file) is injected by a trigger in the test's own schema: the driver sees exactly the
error a full disk produces, through the server, mid-transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from saihm.storage import StorageError, StorageFull, open_storage
from saihm.storage.lmdb import LmdbStorage
from tests.storage.conftest import NS
from tests.support.postgres import fresh_location

MIB = 1 << 20


def fill(storage: object, start: int, count: int) -> None:
    main = storage.namespace(b"main")  # type: ignore[attr-defined]
    with storage.write() as txn:  # type: ignore[attr-defined]
        for i in range(start, start + count):
            txn.put(i.to_bytes(4, "big"), bytes(4000), db=main)


def test_lmdb_full_map_raises_storage_full_then_grow_makes_room(tmp_path: Path) -> None:
    storage = LmdbStorage(tmp_path / "lmdb", NS, map_size=MIB, map_size_max=4 * MIB)
    try:
        fill(storage, 0, 10)
        with pytest.raises(StorageFull):
            fill(storage, 10, 400)  # ~1.6 MB: more than the 1 MiB map
        with storage.read() as snap:
            assert snap.count(storage.namespace(b"main")) == 10  # nothing of it written
        assert storage.grow() is True
        fill(storage, 10, 400)  # the same writes, tried again from the start
        with storage.read() as snap:
            assert snap.count(storage.namespace(b"main")) == 410
        with pytest.raises(StorageFull):
            fill(storage, 410, 1000)  # ~4 MB more: past the 4 MiB ceiling
        while storage.grow():
            pass
        assert storage.map_size == 4 * MIB
        assert storage.grow() is False
        with storage.read() as snap:
            assert snap.count(storage.namespace(b"main")) == 410
    finally:
        storage.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_location() as url:
        yield url


def inject_disk_full(url: str) -> None:
    """Make every write of a key starting ``full`` fail as a full disk does."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """
            CREATE FUNCTION saihm_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF substring(NEW.k FROM 1 FOR 4) = 'full'::bytea THEN
                RAISE EXCEPTION 'could not extend file: No space left on device'
                  USING ERRCODE = 'disk_full';
              END IF;
              RETURN NEW;
            END $$;
            CREATE TRIGGER saihm_test_disk_full BEFORE INSERT OR UPDATE ON saihm_kv
              FOR EACH ROW EXECUTE FUNCTION saihm_test_disk_full();
            """
        )


def test_postgresql_disk_full_raises_storage_full_and_writes_nothing(pg_url: str) -> None:
    storage = open_storage(pg_url, NS)
    try:
        main = storage.namespace(b"main")
        with storage.write() as txn:
            txn.put(b"before", b"1", db=main)
        inject_disk_full(pg_url)
        for write in (
            lambda txn: txn.put(b"full-1", b"x", db=main),
            lambda txn: txn.put_many([(b"a", b"1"), (b"full-2", b"x")], db=main),
            lambda txn: txn.put_many([(b"full-3", b"x")], db=main, append=True),
        ):
            with pytest.raises(StorageFull) as caught, storage.write() as txn:
                txn.put(b"\x00same-transaction", b"1", db=main)
                write(txn)
            assert caught.value.code == "operator_storage_full"
            assert "53100" in str(caught.value)
            # The database takes room as it needs it: only its operator can add disk.
            assert storage.grow() is False
        with storage.read() as snap:
            assert list(snap.scan(main)) == [(b"before", b"1")]
        with storage.write() as txn:  # the storage goes on working for what fits
            txn.put(b"after", b"2", db=main)
        with storage.read() as snap:
            assert [k for k, _ in snap.scan(main)] == [b"after", b"before"]
    finally:
        storage.close()


def test_postgresql_a_failed_statement_cannot_be_committed(pg_url: str) -> None:
    """A caller that swallows the error of one statement and leaves the block normally gets
    a StorageError, not a commit that PostgreSQL silently turned into a rollback."""
    storage = open_storage(pg_url, NS)
    try:
        main = storage.namespace(b"main")
        inject_disk_full(pg_url)
        # Writes are buffered until the commit, which reports their error.
        with pytest.raises(StorageFull), storage.write() as txn:
            txn.put(b"ok", b"1", db=main)
            assert txn.put(b"full", b"x", db=main, overwrite=False) is True
        # A range read sends the buffered writes of its namespace before itself, and raises
        # their error: swallowing it there changes nothing.
        with pytest.raises(StorageError, match="failed"), storage.write() as txn:
            txn.put(b"ok", b"1", db=main)
            txn.put(b"full", b"x", db=main)
            with pytest.raises(StorageFull):
                list(txn.scan(main))
            txn.put(b"ok2", b"2", db=main)
        with storage.read() as snap:
            assert snap.get(b"ok", db=main) is None
            assert snap.get(b"ok2", db=main) is None
    finally:
        storage.close()
