"""``saihm migrate --from DIR --to URL``: move an operator's store from LMDB to PostgreSQL.

DESIGN.md "Pinned additions for the second round"; docs/scaling.md "Moving an operator".
Every namespace the store declares (the log's leaves and tiles, checkpoints, the keyring's
wrapped DEKs and seeds, the projections, the store's own databases) is copied key for key,
value for value, through the storage interface (saihm.storage), so the target holds exactly
what the source held: the same leaves, so the same tree and the same roots.

How (the promises, each tested in tests/cli/test_migrate.py):

- **Of one moment.** The copy is read inside the source's write transaction: no write (a
  remember, a checkpoint, a KEK rotation's re-wrap) can land on the source while it runs, so
  no copied DEK can be re-wrapped and its old KEK destroyed behind the copy's back. A server
  still running on DIR waits for the migrate, and must then be stopped: serving DIR's LMDB
  after a migrate would fork the log, so the command records the move in ``DIR/migrated``
  and the command line refuses to open DIR's LMDB again (:func:`refuse_migrated`).
- **Atomic.** The target is written in one write transaction, committed only after every
  namespace was read back inside it and found byte-identical (SHA-256 over its keys and
  values, in order). A migrate that fails, is refused or is killed leaves the target empty;
  run it again. It is not resumable: nothing partial is ever visible to resume from.
- **Into an empty store only.** A target with any key in any namespace is refused (one line,
  nothing written), so a migrate can never merge two logs or overwrite one.
- **In bounded memory.** Keys stream from a cursor into the target in chunks of
  :data:`CHUNK` pairs; nothing holds a namespace whole. Progress goes to stderr (rich) when
  it is a terminal.
- Node-local files stay in DIR: the log keys, ``authority.pub``, the origin, the published
  verifier keys; the KEK directory stays where it is. Nothing secret is copied out of the
  store it was in, and no message shows the URL's password.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from saihm.errors import Conflict, VerificationFailed
from saihm.storage import ReadTxn, Storage, WriteTxn
from saihm.storage.url import MARKER, refuse_migrated
from saihm.store import STORAGE_NAMES

__all__ = [
    "CHUNK",
    "MARKER",
    "MigrateReport",
    "migrate_storage",
    "refuse_migrated",
    "store_namespaces",
]

#: Pairs written per ``put_many`` call: the bound on what the copy holds in memory at once.
CHUNK = 512
LEAVES = b"leaves"

Advance = Callable[[int], None]
Tasks = Callable[[str, int], Advance]


def store_namespaces() -> tuple[bytes, ...]:
    """Every namespace the store declares, in the order it opens them
    (saihm/store/environment.py)."""
    return STORAGE_NAMES


@dataclass
class MigrateReport:
    """What was copied: keys and bytes per namespace, the log's size, the time taken."""

    tree_size: int = 0
    keys: int = 0
    bytes: int = 0
    seconds: float = 0.0
    namespaces: dict[str, int] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "treeSize": self.tree_size,
            "keys": self.keys,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "namespaces": self.namespaces,
        }


def _pairs(txn: ReadTxn, storage: Storage, name: bytes) -> Iterator[tuple[bytes, bytes]]:
    for key, value in txn.scan(storage.namespace(name)):
        yield bytes(key), bytes(value)


def _frame(key: bytes, value: bytes) -> bytes:
    """One pair as the digest hashes it: lengths first, so no two streams frame alike."""
    return len(key).to_bytes(2, "big") + key + len(value).to_bytes(8, "big") + value


def _digest(pairs: Iterator[tuple[bytes, bytes]]) -> tuple[str, int, int]:
    """SHA-256 over length-prefixed keys and values in order, the count and the value bytes."""
    h = hashlib.sha256()
    count = size = 0
    for key, value in pairs:
        h.update(_frame(key, value))
        count += 1
        size += len(value)
    return h.hexdigest(), count, size


def _check_empty(txn: WriteTxn, target: Storage, names: Sequence[bytes]) -> None:
    for name in names:
        held = txn.count(target.namespace(name))
        if held:
            raise Conflict(
                f"the target store is not empty (namespace {name.decode()} holds {held} keys); "
                "saihm migrate copies into an empty database only"
            )


def migrate_storage(
    source: Storage,
    target: Storage,
    names: Sequence[bytes] | None = None,
    *,
    tasks: Tasks | None = None,
    fault: Callable[[str], None] | None = None,
    committed: Callable[[MigrateReport], None] | None = None,
) -> MigrateReport:
    """Copy every namespace of ``names`` (default :func:`store_namespaces`) from ``source`` to
    the empty ``target``, atomically; return what was copied.

    Holds ``source``'s write transaction throughout (and aborts it: nothing is written there).
    Raises :class:`Conflict` (nothing written) when the target holds any key, and
    :class:`~saihm.errors.VerificationFailed` (nothing written) when what the target's
    transaction reads back differs from the source. ``fault`` is a crash-test hook called at
    ``"copied"`` (every chunk written, before the read-back) and ``"before_commit"``;
    ``committed`` is called once the target has committed, while the source is still held (the
    command records the move there, so no write can reach the source in between).
    """
    names = tuple(names if names is not None else store_namespaces())
    hook = fault or (lambda step: None)
    start_task: Tasks = tasks or (lambda name, total: lambda n: None)
    report = MigrateReport()
    started = time.monotonic()
    hold = source.write()
    try:
        with target.write() as out:
            _check_empty(out, target, names)
            counts = {name: hold.count(source.namespace(name)) for name in names}
            advance = start_task("copying the store", sum(counts.values()))
            expected: dict[bytes, str] = {}
            for name in names:
                h = hashlib.sha256()
                chunks = _pairs(hold, source, name)
                while chunk := list(itertools.islice(chunks, CHUNK)):
                    for key, value in chunk:
                        h.update(_frame(key, value))
                        report.bytes += len(value)
                    out.put_many(chunk, db=target.namespace(name), append=True)
                    advance(len(chunk))
                expected[name] = h.hexdigest()
            hook("copied")
            check = start_task("checking the copy", len(names))
            for name in names:
                digest, count, _ = _digest(_pairs(out, target, name))
                if digest != expected[name] or count != counts[name]:
                    raise VerificationFailed(
                        f"namespace {name.decode()} reads back different from the source "
                        f"({count} of {counts[name]} keys); nothing was committed"
                    )
                report.namespaces[name.decode()] = count
                report.digests[name.decode()] = digest
                report.keys += count
                check(1)
            report.tree_size = counts.get(LEAVES, 0)
            hook("before_commit")
        report.seconds = time.monotonic() - started
        if committed is not None:
            committed(report)
    finally:
        hold.abort()
    return report
