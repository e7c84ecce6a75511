"""``saihm backup --data DIR DEST``: a consistent, compacted copy of a data directory, without
KEKs (DESIGN.md "Pinned additions"; docs/operations.md "Backups and restore").

The LMDB environment is copied with ``Environment.copy(path, compact=True, txn=...)`` inside one
read transaction: the copy is the snapshot that transaction sees, whatever a running server
writes meanwhile, without LMDB's free pages. A live page can still hold the slack a deleted
record left, so the bytes of a destroyed wrapped DEK may be in a backup: erasure rests on the
KEK generation they are wrapped under being retired, not on the copy (docs/formats.md §4).
The other files of the data directory (``authority.pub``, the
published verifier keys, the origin) are copied beside it, but never key material, wherever it
lies and whatever paths this command was given (docs/operations.md "Backups and restore"): a
directory or file is recognised by the names and markers the project writes it with
(:mod:`saihm.keyring.kekdir`, :data:`saihm.config.AUTHORITY_SEED_FILE`, :class:`LogKeys.save
<saihm.translog.checkpoint.LogKeys>`), not only by the configured ``--kek-dir``,
``--authority-dir`` and ``--log-keys-dir``, and a symbolic link is judged by what it points
at. KEK generations, the memo key, the rotation state and the authority seed are always left
out; the log's private signing keys only unless ``include_log_keys``. What is left out is
named in the report. A backup is ciphertext and wrapped keys only.

The copy is written to a fresh directory beside ``DEST`` and renamed to ``DEST`` once complete
and flushed, so an interrupted or failed backup (a full disk, kill -9) never leaves a ``DEST``
that looks whole.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from saihm.config import AUTHORITY_SEED_FILE, Config
from saihm.errors import Conflict, MalformedInput, Unavailable
from saihm.storage import ReadTxn, StorageError, is_url
from saihm.storage.base import Namespace
from saihm.storage.lmdb import LmdbStorage

__all__ = ["LOG_KEYS", "BackupReport", "backup", "key_material"]

#: Files LMDB recreates at need; never copied.
SKIP_NAMES = frozenset({"lock.mdb"})
CHECKPOINTS = b"checkpoints"
LEAVES = b"leaves"

# The names and markers key material is written with. A KEK directory (saihm/keyring/kekdir.py)
# writes each file under ".NAME.tmp" first, so a crash can leave a key under that name too.
_KEK_FILE = re.compile(r"\.?kek-[0-9a-f]{8}(?:\.tmp)?")
_MEMO_FILE = re.compile(r"\.?memo\.key(?:\.tmp)?")
_STATE_FILE = re.compile(r"\.?state\.json(?:\.tmp)?")
#: The log's private checkpoint keys (LogKeys.save), and the first bytes of every private
#: signed-note key the project writes (Go's "PRIVATE+KEY+name+id+key" format).
LOG_KEY_FILES = frozenset({"checkpoint-ed25519.key", "checkpoint-mldsa44.key"})
_PRIVATE_NOTE_KEY = b"PRIVATE+KEY+"

#: What each kind of key material is called in the report.
KEK = "KEK generations"
MEMO = "the memo key"
ROTATION_STATE = "the KEK rotation state"
AUTHORITY_SEED = "the authority seed"
LOG_KEYS = "the log's signing keys"


@dataclass(frozen=True)
class BackupReport:
    """What one backup holds: the log size and latest checkpoint of its snapshot."""

    dest: Path
    tree_size: int
    checkpoint_size: int
    lmdb_bytes: int
    files: tuple[str, ...]
    #: What was left out as key material: (path relative to the data directory, what it holds).
    left_out: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "dest": str(self.dest),
            "treeSize": self.tree_size,
            "checkpointSize": self.checkpoint_size,
            "lmdbBytes": self.lmdb_bytes,
            "files": list(self.files),
            "leftOut": [path for path, _ in self.left_out],
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


def _is_kek_state(path: Path) -> bool:
    """Whether ``path`` holds a KEK directory's state (``{"format": 1, "current": N, ...}``)."""
    try:
        state = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(state, dict) and {"current", "highest", "retired"} <= state.keys()


def _starts_with(path: Path, marker: bytes) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(len(marker)) == marker
    except OSError:
        return False


def key_material(path: Path) -> str | None:
    """What key material the regular file ``path`` holds (:data:`KEK`, :data:`MEMO`,
    :data:`ROTATION_STATE`, :data:`AUTHORITY_SEED`, :data:`LOG_KEYS`), or None.

    Judged by the names the project writes key material under, by the name a symbolic link
    points at as well as its own, and by content: a private signed-note key, or a JSON object
    shaped like a KEK directory's state.
    """
    names = {path.name, path.resolve().name}
    if any(_KEK_FILE.fullmatch(name) for name in names):
        return KEK
    if any(_MEMO_FILE.fullmatch(name) for name in names):
        return MEMO
    if AUTHORITY_SEED_FILE in names:
        return AUTHORITY_SEED
    if names & LOG_KEY_FILES or _starts_with(path, _PRIVATE_NOTE_KEY):
        return LOG_KEYS
    if any(_STATE_FILE.fullmatch(name) for name in names) and _is_kek_state(path):
        return ROTATION_STATE
    return None


def _left_out(kind: str | None, include_log_keys: bool) -> str | None:
    """``kind`` if key material of that kind stays out of the backup, else None."""
    return None if kind == LOG_KEYS and include_log_keys else kind


def _key_directory(directory: Path, include_log_keys: bool) -> str | None:
    """The key material that makes ``directory`` a key directory (a file directly in it that
    is left out), or None."""
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return None
    kinds = (key_material(entry) for entry in entries if entry.is_file())
    return next((kind for kind in kinds if _left_out(kind, include_log_keys)), None)


class _Copier:
    """Copies the data directory's files, other than LMDB's and key material, into a backup."""

    def __init__(self, config: Config, staging: Path, include_log_keys: bool) -> None:
        self.root = config.data_dir
        self.staging = staging
        self.include_log_keys = include_log_keys
        self.lmdb_dir = config.lmdb_dir.resolve()
        # The configured key directories, left out even when empty of recognisable files; one
        # that is the data directory or holds it is judged file by file instead.
        configured = [(config.kek_dir, KEK), (config.authority_dir, AUTHORITY_SEED)]
        if not include_log_keys:
            configured.append((config.log_keys_dir, LOG_KEYS))
        root = self.root.resolve()
        self.configured = {
            path.resolve(): kind for path, kind in configured if not _inside(root, path.resolve())
        }
        self.seen: set[Path] = set()
        self.copied: list[str] = []
        self.left_out: list[tuple[str, str]] = []

    def _configured(self, resolved: Path) -> str | None:
        return next((k for d, k in self.configured.items() if _inside(resolved, d)), None)

    def copy(self, directory: Path, relative: Path) -> None:
        """Copy ``directory`` (the data directory, or one inside it) to ``staging/relative``."""
        resolved = directory.resolve()
        if resolved in self.seen:  # a symbolic-link loop, or a second link to one directory
            return
        self.seen.add(resolved)
        for source in sorted(directory.iterdir()):
            name = relative / source.name
            target = source.resolve()
            if source.name in SKIP_NAMES or _inside(target, self.lmdb_dir):
                continue
            if source.is_dir():
                kind = self._configured(target) or _key_directory(source, self.include_log_keys)
                if kind is not None:
                    self.left_out.append((f"{name}/", kind))
                    continue
                (self.staging / name).mkdir(mode=0o700, exist_ok=True)
                self.copy(source, name)
            elif source.is_file():
                kind = _left_out(
                    self._configured(target) or key_material(source), self.include_log_keys
                )
                if kind is not None:
                    self.left_out.append((str(name), kind))
                    continue
                shutil.copy2(source, self.staging / name)
                _fsync(self.staging / name)
                self.copied.append(str(name))


def backup(config: Config, dest: str | Path, *, include_log_keys: bool = False) -> BackupReport:
    """Write a consistent, compacted backup of ``config.data_dir`` to ``dest``, without key
    material: KEK generations, the memo key, the rotation state, the authority seed and,
    unless ``include_log_keys``, the log's private signing keys are left out wherever they lie
    in the data directory (the report's ``left_out`` names them).

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
        report = _write(config, staging, dest, include_log_keys)
        _fsync(staging)
        if dest.exists():
            dest.rmdir()  # empty, checked above
        os.rename(staging, dest)
        _fsync(dest.parent)
        return report
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write(config: Config, staging: Path, dest: Path, include_log_keys: bool) -> BackupReport:
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
    copier = _Copier(config, staging, include_log_keys)
    copier.copy(config.data_dir, Path())
    return BackupReport(
        dest=dest,
        tree_size=0 if leaves is None else leaves + 1,
        checkpoint_size=checkpoint or 0,
        lmdb_bytes=data_file.stat().st_size,
        files=("lmdb/data.mdb", *copier.copied),
        left_out=tuple(copier.left_out),
    )
