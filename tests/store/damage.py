"""Named damage to an operator's private state, written once against a raw view of its storage.

An attacker (or a failing disk) edits rows directly, past the store: through ``lmdb.open`` in
tests/store/test_fsck.py (:class:`LmdbRaw`), through psycopg in
tests/multinode/test_tamper_postgres.py (its ``Raw``). Each damage is the same edit on either
driver, and :data:`DAMAGE` names what ``saihm verify --data`` must report for it: the
namespace, the key (a cell of :class:`Populated`, or none) and the check.
"""

from __future__ import annotations

import json
import random
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import lmdb
import pytest

from saihm.commands import main as cli
from saihm.config import Config
from saihm.projections import apply as PJ
from saihm.projections.keys import u64

from .populated import Populated


class RawStore(Protocol):
    """Rows of the storage by namespace name, read and written past the store."""

    def get(self, name: bytes, key: bytes) -> bytes: ...

    def set(self, name: bytes, key: bytes, value: bytes | None) -> None:
        """Write (or, with None, delete) one row."""

    def rows(self, name: bytes) -> list[tuple[bytes, bytes]]:
        """The namespace's (key, value) rows in key order."""


class LmdbRaw:
    """:class:`RawStore` over an LMDB environment opened with ``lmdb.open``."""

    def __init__(self, env: lmdb.Environment) -> None:
        self.env = env

    def get(self, name: bytes, key: bytes) -> bytes:
        db = self.env.open_db(name)  # before the transaction: open_db begins its own
        with self.env.begin() as txn:
            value = txn.get(key, db=db)
        assert value is not None, (name, key.hex())
        return bytes(value)

    def set(self, name: bytes, key: bytes, value: bytes | None) -> None:
        db = self.env.open_db(name)
        with self.env.begin(write=True) as txn:
            if value is None:
                assert txn.delete(key, db=db), (name, key.hex())
            else:
                txn.put(key, value, db=db)

    def rows(self, name: bytes) -> list[tuple[bytes, bytes]]:
        db = self.env.open_db(name)
        with self.env.begin() as txn:
            return [(bytes(k), bytes(v)) for k, v in txn.cursor(db=db).iternext()]


@contextmanager
def lmdb_raw(config: Config) -> Iterator[LmdbRaw]:
    """The data directory's LMDB environment, opened past the store (which must be closed)."""
    env = lmdb.open(str(config.lmdb_dir), max_dbs=64, map_size=config.map_size)
    try:
        yield LmdbRaw(env)
    finally:
        env.close()


def flip(value: bytes, position: int) -> bytes:
    """``value`` with the low bit of the byte at ``position`` flipped."""
    return value[:position] + bytes([value[position] ^ 0x01]) + value[position + 1 :]


def delete_body(p: Populated, raw: RawStore) -> None:
    raw.set(b"bodies", p.cells["a1"], None)


def delete_dek(p: Populated, raw: RawStore) -> None:
    raw.set(b"deks", p.cells["bob"], None)


def dek_for_erased_cell(p: Populated, raw: RawStore) -> None:
    raw.set(b"deks", p.cells["a1_gone"], raw.get(b"deks", p.cells["a1"]))


def dek_under_retired_generation(p: Populated, raw: RawStore) -> None:
    value = raw.get(b"deks", p.cells["carol"])
    raw.set(b"deks", p.cells["carol"], struct.pack(">I", 999) + value[4:])


def swap_seeds(p: Populated, raw: RawStore) -> None:
    a, b = (raw.get(b"seeds", p.holders[n]) for n in ("alice", "bob"))
    raw.set(b"seeds", p.holders["alice"], b)
    raw.set(b"seeds", p.holders["bob"], a)


def orphan_dek(p: Populated, raw: RawStore) -> None:
    raw.set(b"deks", b"\x07" * 32, raw.get(b"deks", p.cells["a1"]))


def wrong_memo(p: Populated, raw: RawStore) -> None:
    value = raw.get(b"memo", p.cells["a2"])
    raw.set(b"memo", p.cells["a2"], bytes(32 - len(value[:1])) + value[:1])


def flip_a_tile(p: Populated, raw: RawStore) -> None:
    key, value = raw.rows(b"tree")[0]
    raw.set(b"tree", key, flip(value, 0))


def lagging_applied_index(p: Populated, raw: RawStore) -> None:
    applied = struct.unpack(">Q", raw.get(PJ.META, b"applied"))[0]
    raw.set(PJ.META, b"applied", u64(applied - 1))


Damage = Callable[[Populated, RawStore], None]
DAMAGE: dict[str, tuple[Damage, str, str, str]] = {
    # name: (damage, namespace, key name in Populated.cells or "", check)
    "delete_body": (delete_body, "bodies", "a1", "live cell"),
    "delete_dek": (delete_dek, "deks", "bob", "live cell"),
    "dek_for_erased_cell": (dek_for_erased_cell, "deks", "a1_gone", "erased cell"),
    "dek_under_retired_generation": (dek_under_retired_generation, "deks", "carol", "live cell"),
    "swap_seeds": (swap_seeds, "seeds", "", "seed"),
    "orphan_dek": (orphan_dek, "deks", "", "orphan"),
    "wrong_memo": (wrong_memo, "memo", "a2", "memo"),
    "flip_a_tile": (flip_a_tile, "tree", "", "tiles"),
    "lagging_applied_index": (lagging_applied_index, "p_meta", "", "applied index"),
}


Views = dict[str, frozenset[str] | None]


@dataclass
class Verdicts:
    """What each raw edit did, against the untouched store's views (``baseline``).

    An edit must never let a token see a plaintext it could not see before. Beyond that it is
    *detected* (``verify --data`` fails, naming failures), *harmless* (every token's view is
    as before) or *undetected*: the one outcome a tamper test refuses.
    """

    baseline: Views
    counts: Counter[str] = field(default_factory=Counter)
    harmless: list[tuple[str, str]] = field(default_factory=list)
    undetected: list[tuple[str, str]] = field(default_factory=list)

    def judge(self, name: bytes, op: str, code: int, report: dict, views: Views) -> None:
        """Record one edit of namespace ``name`` by ``op``: verify's ``code`` and ``report``,
        and the views of the store reopened after it."""
        for token, seen in views.items():
            # A token refused before (a withdrawn grant, a revoked session) stays refused.
            if self.baseline[token] is None:
                assert seen is None, (name, op, token)
            before = self.baseline[token] or frozenset()
            assert seen is None or seen <= before, (name, op, token, seen - before)
        if code != 0:
            assert code == 1 and report["failures"], (name, op, code)
            self.counts["detected"] += 1
        elif views == self.baseline:
            self.counts["harmless"] += 1
            self.harmless.append((name.decode(), op))
        else:
            self.counts["undetected"] += 1
            self.undetected.append((name.decode(), op))


#: (namespace, op, [(key, new value or None)]): one raw edit of one namespace.
Edit = tuple[bytes, str, list[tuple[bytes, bytes | None]]]


def random_edits(
    tables: Iterable[tuple[bytes, list[tuple[bytes, bytes]]]],
    rng: random.Random,
    *,
    insert: bool = False,
) -> list[Edit]:
    """Every op ("flip", "delete", "swap", "drop_last", and with ``insert`` a row that was
    never written) on each namespace of ``tables`` (name, its non-empty rows in key order),
    the rows chosen by ``rng``."""
    out: list[Edit] = []
    for name, items in tables:
        key, value = rng.choice(items)
        if value:
            out.append((name, "flip", [(key, flip(value, rng.randrange(len(value))))]))
        out.append((name, "delete", [(rng.choice(items)[0], None)]))
        distinct = [kv for kv in items if kv[1] != items[0][1]]
        if distinct:
            (k1, v1), (k2, v2) = items[0], rng.choice(distinct)
            out.append((name, "swap", [(k1, v2), (k2, v1)]))
        out.append((name, "drop_last", [(items[-1][0], None)]))
        if insert:
            # A copy of an existing value under a new key.
            existing = {k for k, _ in items}
            new_key = flip(key, len(key) - 1)
            while new_key in existing:
                new_key = bytes(rng.randrange(256) for _ in key)
            out.append((name, "insert", [(new_key, rng.choice(items)[1])]))
    return out


def verify_code(capsys: pytest.CaptureFixture[str], argv: list[str]) -> int:
    """``saihm verify ARGV --json --no-progress`` in this process: its exit code, after
    checking that a failure names its findings and nothing is a traceback."""
    capsys.readouterr()
    code = cli.main(["verify", *argv, "--json", "--no-progress"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code in (0, 1), (code, err[-2000:])
    if code == 1:
        assert json.loads(out)["failures"]
    return code
