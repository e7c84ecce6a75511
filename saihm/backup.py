"""``saihm backup --data DIR DEST``: a consistent, compacted copy of a data directory, without
KEKs (DESIGN.md "Pinned additions"; docs/operations.md "Backups and restore").

The LMDB environment is copied with ``Environment.copy(path, compact=True, txn=...)`` inside one
read transaction: the copy is the snapshot that transaction sees, whatever a running server
writes meanwhile, without LMDB's free pages. A live page can still hold the slack a deleted
record left, so the bytes of a destroyed wrapped DEK may be in a backup: erasure rests on the
KEK generation they are wrapped under being retired, not on the copy (docs/formats.md §4).
The other files of the data directory (``authority.pub``, the
published verifier keys and, where they are kept there, the log keys) are copied beside it.
The KEK directory is never copied, even when it was placed inside the data directory: a backup
is ciphertext and wrapped keys only.

The copy is written to a fresh directory beside ``DEST`` and renamed to ``DEST`` once complete
and flushed, so an interrupted or failed backup (a full disk, kill -9) never leaves a ``DEST``
that looks whole.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from saihm.config import Config
from saihm.errors import Conflict, MalformedInput, SaihmError, Unavailable
from saihm.storage import ReadTxn, StorageError, is_url
from saihm.storage.base import Namespace
from saihm.storage.lmdb import LmdbStorage

__all__ = ["BackupReport", "backup", "main"]

#: Files LMDB recreates at need; never copied.
SKIP_NAMES = frozenset({"lock.mdb"})
CHECKPOINTS = b"checkpoints"
LEAVES = b"leaves"


@dataclass(frozen=True)
class BackupReport:
    """What one backup holds: the log size and latest checkpoint of its snapshot."""

    dest: Path
    tree_size: int
    checkpoint_size: int
    lmdb_bytes: int
    files: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "dest": str(self.dest),
            "treeSize": self.tree_size,
            "checkpointSize": self.checkpoint_size,
            "lmdbBytes": self.lmdb_bytes,
            "files": list(self.files),
        }


def _last_u64(txn: ReadTxn, db: Namespace) -> int | None:
    """The last key (u64 big-endian) of namespace ``db`` in ``txn``, or None if empty/absent."""
    last = txn.last(db)
    return None if last is None else int.from_bytes(last[0], "big")


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_files(config: Config, dest: Path) -> list[str]:
    """Copy the data directory's files other than LMDB and any KEK directory inside it."""
    copied = []
    kek = config.kek_dir.resolve()
    lmdb_dir = config.lmdb_dir.resolve()
    for source in sorted(config.data_dir.rglob("*")):
        resolved = source.resolve()
        if _inside(resolved, lmdb_dir) or _inside(resolved, kek) or source.name in SKIP_NAMES:
            continue
        relative = source.relative_to(config.data_dir)
        target = dest / relative
        if source.is_dir():
            target.mkdir(mode=0o700, exist_ok=True)
        elif source.is_file():
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copy2(source, target)
            _fsync(target)
            copied.append(str(relative))
    return copied


def backup(config: Config, dest: str | Path) -> BackupReport:
    """Write a consistent, compacted backup of ``config.data_dir`` to ``dest``.

    Preconditions: ``dest`` does not exist (or is an empty directory) and is not inside the
    data directory. Raises :class:`MalformedInput` for a bad ``dest``, :class:`Conflict` when
    ``dest`` holds anything, :class:`Unavailable` when LMDB cannot be read or the copy cannot be
    written (nothing is left at ``dest`` then), and for a store that is not in LMDB (the hot
    copy is LMDB's; a PostgreSQL store is backed up with PostgreSQL's own tools). Safe while a
    server writes to the same directory: the copy is one read snapshot.
    """
    if is_url(config.storage_location):
        raise Unavailable(
            "saihm backup copies an LMDB store; back up a PostgreSQL store with pg_dump"
        )
    dest = Path(dest).absolute()
    if _inside(dest.resolve(), config.data_dir.resolve()):
        raise MalformedInput(f"{dest} is inside the data directory; back up to another place")
    if _inside(dest.resolve(), config.kek_dir.resolve()):
        raise MalformedInput(f"{dest} is inside the KEK directory; back up to another place")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise Conflict(f"{dest} already exists and is not an empty directory")
    if not dest.parent.is_dir():
        raise MalformedInput(f"{dest.parent} does not exist")
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        report = _write(config, staging, dest)
        _fsync(staging)
        if dest.exists():
            dest.rmdir()  # empty, checked above
        os.rename(staging, dest)
        _fsync(dest.parent)
        return report
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write(config: Config, staging: Path, dest: Path) -> BackupReport:
    (staging / "lmdb").mkdir(mode=0o700)
    try:
        storage = LmdbStorage(config.lmdb_dir, (LEAVES, CHECKPOINTS), readonly=True)
    except StorageError as err:
        raise Unavailable(f"cannot open {config.lmdb_dir}: {err}") from err
    try:
        with storage.read() as txn:
            leaves = _last_u64(txn, storage.namespace(LEAVES))
            checkpoint = _last_u64(txn, storage.namespace(CHECKPOINTS))
            try:
                storage.copy_to(staging / "lmdb", compact=True, snapshot=txn)
            except StorageError as err:
                raise Unavailable(f"cannot write the backup: {err}") from err
    finally:
        storage.close()
    data_file = staging / "lmdb" / "data.mdb"
    data_file.chmod(0o600)  # ciphertext and wrapped keys: the owner's only
    _fsync(data_file)
    files = _copy_files(config, staging)
    return BackupReport(
        dest=dest,
        tree_size=0 if leaves is None else leaves + 1,
        checkpoint_size=checkpoint or 0,
        lmdb_bytes=data_file.stat().st_size,
        files=("lmdb/data.mdb", *files),
    )


def main(args: argparse.Namespace) -> int:
    """``saihm backup --data DIR DEST``: prints the report as one JSON line."""
    from saihm.cli import config_from

    try:
        report = backup(config_from(args), args.dest)
    except OSError as err:
        raise Unavailable(f"cannot write the backup: {err.strerror or err}") from err
    except SaihmError:
        raise
    print(json.dumps(report.to_json()), flush=True)
    return 0
