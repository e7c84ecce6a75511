"""A tiled log as plain files (c2sp.org/tlog-tiles), written so any static server can serve it.

``TileDir`` is the writer shared by ``saihm publish`` (the operator's own log, read through the
store's public-log reads) and ``saihm mirror`` (a stranger's verified copy). Layout at the
directory's root, exactly the URL paths of tlog-tiles with the prefix removed:

- ``checkpoint``: the signed checkpoint note (written last, atomically);
- ``tile/<L>/<N>`` and ``tile/<L>/<N>.p/<W>``: hash tiles, full and partial;
- ``tile/entries/<N>`` and ``tile/entries/<N>.p/<W>``: entry bundles;
- ``v1/keys``: JSON ``{"origin", "checkpointKeys": [{"vkey"}]}``, the checkpoint verifier keys
  in the shape ``GET /log/v1/keys`` serves (still the log's own claim: pin keys with
  ``--trust``).

Full tiles and full entry bundles never change (tlog-tiles: "This endpoint is immutable"): a
full file is written once, and finding a different one already there is a conflict, never an
overwrite. Only partial tiles and the checkpoint change. Every file is written to a temporary
name, fsynced and renamed, so a reader (or a crash) sees the old file or the new one, and the
checkpoint is written after every tile it needs. Nothing is read or written through a symbolic
link below the directory: every component of a path is opened without following links
(``O_NOFOLLOW``, relative to its parent's descriptor), and a link found anywhere under the root
(``tile``, ``tile/0/000.p``, ``checkpoint``, ``v1``, ...) is refused with ``NotPermitted``
naming it, so a publication never writes outside its own directory. Partial tiles of sizes
older than the previous checkpoint are deleted afterwards (tlog-tiles: a log "MAY delete any
partial tile once the corresponding full tile is available"); those of the previous checkpoint
are kept one round for clients still holding it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from saihm.errors import Conflict, MalformedInput, NotPermitted, SaihmError
from saihm.translog import Checkpoint
from saihm.translog.note import parse_note
from saihm.translog.tiles import changed_tiles, tile_path

__all__ = [
    "LogReader",
    "Target",
    "TileDir",
    "checkpoint_of",
    "locked",
    "publish",
    "tile_paths",
]


class LogReader(Protocol):
    """What ``publish`` reads: the store's public-log reads have exactly these methods."""

    def checkpoint_now(self) -> bytes: ...

    def tile(self, level: int, index: int, width: int | None) -> bytes: ...

    def entry_bundle(self, index: int, width: int | None) -> bytes: ...


def checkpoint_of(note: bytes) -> Checkpoint:
    """The checkpoint body of a signed note, signatures not checked (sizes and roots only).

    Raises ``MalformedInput`` if it is not a note carrying a checkpoint.
    """
    try:
        text, _ = parse_note(note)
        return Checkpoint.parse(text)
    except SaihmError as err:
        raise MalformedInput(f"not a signed checkpoint: {err}") from err


def tile_paths(size: int) -> list[str]:
    """Every tlog-tiles path a tree of ``size`` leaves has (full and partial; entries too)."""
    return [_path(level, index, width) for level, index, width in changed_tiles(0, size)] + [
        _path(None, index, width) for level, index, width in changed_tiles(0, size) if level == 0
    ]


def _path(level: int | None, index: int, width: int) -> str:
    return tile_path(level, index, None if width == 256 else width)


def partial_paths(size: int) -> set[str]:
    """The partial tiles and bundles a tree of ``size`` leaves has."""
    return {p for p in tile_paths(size) if ".p/" in p}


class TileDir:
    """Writes one tiled log into ``root`` (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.name = str(root)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Create the directory if need be and hold its lock (one writer at a time)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with locked(self.root):
            yield

    def current(self) -> Checkpoint | None:
        """The checkpoint published now, or None for an empty directory."""
        data = self._read("checkpoint")
        return checkpoint_of(data) if data is not None else None

    def write(self, path: str, data: bytes, *, immutable: bool) -> bool:
        """Write ``data`` at ``path``; return False if an immutable file was already there.

        Raises ``Conflict`` when an immutable file exists with other content: a full tile never
        changes, so a different one means two different logs were written into one directory.
        Raises ``NotPermitted`` when a component of ``path`` under the root is a symbolic link.
        """
        if immutable:
            there = self._read(path)
            if there is not None:
                if there != data:
                    raise Conflict(
                        f"{self.root / path} exists with other content: a full tile never changes"
                    )
                return False
        self._write(path, data)
        return True

    def _read(self, path: str) -> bytes | None:
        """The bytes at ``path`` under the root, None if it is absent; no link followed."""
        *parents, name = path.split("/")
        try:
            directory = _open_dir(self.root, parents, create=False)
        except FileNotFoundError:
            return None
        try:
            fd = _open_in(directory, name, os.O_RDONLY, self.root, path)
        except FileNotFoundError:
            return None
        finally:
            os.close(directory)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def _write(self, path: str, data: bytes) -> None:
        """Write ``path`` under the root atomically (a temporary name, fsync, rename)."""
        *parents, name = path.split("/")
        directory = _open_dir(self.root, parents, create=True)
        try:
            _refuse_link(directory, name, self.root, path)
            tmp = f"{name}.{os.getpid()}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            shown = "/".join([*parents, tmp])
            with os.fdopen(_open_in(directory, tmp, flags, self.root, shown), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
        finally:
            os.close(directory)

    def write_keys(self, origin: str, verifier_keys: Iterable[str]) -> None:
        """Write ``v1/keys`` (see the module docstring)."""
        body = {"origin": origin, "checkpointKeys": [{"vkey": k} for k in verifier_keys]}
        self.write("v1/keys", json.dumps(body, indent=1).encode() + b"\n", immutable=False)

    def write_checkpoint(self, note: bytes) -> None:
        """Replace ``checkpoint`` atomically (call after every tile it needs is written)."""
        self._write("checkpoint", note)
        _fsync_dir(self.root)

    def prune_partials(self, keep_sizes: Iterable[int]) -> int:
        """Delete partial tiles and bundles no size in ``keep_sizes`` has; return how many.

        Also removes temporary files a killed run left behind (the caller holds the lock, so
        none is being written).
        """
        keep = {p for size in keep_sizes for p in partial_paths(size)}
        removed = 0
        # fwalk descends by descriptor and never into a link, so unlinking stays under the root.
        for directory, dirs, files, dir_fd in os.fwalk(self.root):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                rel = Path(directory, name).relative_to(self.root).as_posix()
                stale = name.endswith(".tmp")
                if stale or (
                    directory.endswith(".p") and rel.startswith("tile/") and rel not in keep
                ):
                    os.unlink(name, dir_fd=dir_fd)
                    removed += not stale
        return removed


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``directory`` itself (no lock file in a publication)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _open_dir(root: Path, parents: Sequence[str], *, create: bool) -> int:
    """A descriptor of ``root/parents...``, each component opened without following a link.

    ``root`` itself may be a link (the operator named it); below it, a link is refused with
    ``NotPermitted``. With ``create``, missing directories are made; without it, a missing one
    raises ``FileNotFoundError``.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for depth, part in enumerate(parents, 1):
            shown = "/".join(parents[:depth])
            flags = os.O_RDONLY | os.O_DIRECTORY
            try:
                child = _open_in(fd, part, flags, root, shown)
            except FileNotFoundError:
                if not create:
                    raise
                # Made meanwhile or not, the open below still refuses a link.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                child = _open_in(fd, part, flags, root, shown)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_in(directory: int, name: str, flags: int, root: Path, shown: str) -> int:
    """``os.open(name, flags | O_NOFOLLOW)`` in ``directory``; a link there is refused."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW, 0o666, dir_fd=directory)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            _refuse_link(directory, name, root, shown)
        raise


def _refuse_link(directory: int, name: str, root: Path, shown: str) -> None:
    """Raise ``NotPermitted`` if ``name`` in ``directory`` is a symbolic link."""
    try:
        mode = os.lstat(name, dir_fd=directory).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise NotPermitted(
            f"{root / shown} is a symbolic link: refusing to write through it "
            "(a publication writes nothing outside its directory)"
        )


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Target(Protocol):
    """Where ``publish`` writes: a ``TileDir``, or an object store (``saihm.audit.s3``)."""

    name: str

    def lock(self) -> AbstractContextManager[None]: ...

    def current(self) -> Checkpoint | None: ...

    def write(self, path: str, data: bytes, *, immutable: bool) -> bool: ...

    def write_keys(self, origin: str, verifier_keys: Iterable[str]) -> None: ...

    def write_checkpoint(self, note: bytes) -> None: ...

    def prune_partials(self, keep_sizes: Iterable[int]) -> int: ...


def publish(
    log: LogReader, out: str | Path | Target, *, verifier_keys: list[str]
) -> dict[str, int]:
    """Bring the publication ``out`` up to the log's current checkpoint, incrementally.

    ``out`` is a directory (a ``TileDir`` is made for it) or any ``Target``. Writes the full
    tiles and bundles the publication lacks (checking, not rewriting, those it has), the
    partial ones of the new size, ``v1/keys``, then the checkpoint. Raises ``Conflict`` if
    ``out`` holds another log's checkpoint (other origin), a larger checkpoint than the log (a
    publication never moves back), or a full tile that differs.
    """
    target = TileDir(out) if isinstance(out, str | Path) else out
    with target.lock():
        return _publish(log, target, verifier_keys)


def _publish(log: LogReader, target: Target, verifier_keys: list[str]) -> dict[str, int]:
    out = target.name
    note = log.checkpoint_now()
    new = checkpoint_of(note)
    old = target.current()
    if old is not None and old.origin != new.origin:
        raise Conflict(f"{out} publishes the log {old.origin!r}, not {new.origin!r}")
    if old is not None and old.size > new.size:
        raise Conflict(
            f"{out} holds checkpoint size {old.size}, larger than the log's {new.size}: "
            "refusing to roll the publication back"
        )
    if old is not None and old.size == new.size and old.root_hash != new.root_hash:
        raise Conflict(f"{out} holds another root for size {new.size}: refusing to fork it")
    written = kept = 0
    # Only what grew since the published checkpoint; full tiles found from an interrupted
    # run are compared, not rewritten.
    for level, index, width in changed_tiles(old.size if old else 0, new.size):
        full = width == 256
        data = log.tile(level, index, None if full else width)
        if target.write(_path(level, index, width), data, immutable=full):
            written += 1
        else:
            kept += 1
        if level == 0:
            bundle = log.entry_bundle(index, None if full else width)
            if target.write(_path(None, index, width), bundle, immutable=full):
                written += 1
            else:
                kept += 1
    target.write_keys(new.origin, verifier_keys)
    target.write_checkpoint(note)
    pruned = target.prune_partials({new.size} | ({old.size} if old else set()))
    return {
        "size": new.size,
        "previousSize": old.size if old else 0,
        "written": written,
        "alreadyThere": kept,
        "prunedPartials": pruned,
    }
