"""KEK generations as files in a directory kept outside the LMDB data (DESIGN.md "Data at rest").

Layout (directory mode 0700, files 0600):

- ``kek-XXXXXXXX`` — one 32-byte KEK per live generation, XXXXXXXX the 32-bit kekVersion in hex;
- ``memo.key`` — a separate 32-byte HMAC key for the store's "this exact cell verified" memo;
- ``state.json`` — ``{"format": 1, "current": N, "highest": N, "retired": [...],
  "issued": {"N": epoch}}``: the generation in force, the highest number ever issued (never
  reused), the retired set and, for generations issued with a clock reading, when;
- ``.lock`` — an advisory ``flock`` serialising ``new_generation`` and ``retire`` across
  processes;
- ``rotate.lock`` — the rotation's own ``flock`` (:mod:`saihm.keyring.lock`), held through a
  whole rotation: issue, re-wrap, check and retire.

Every file is written to a temporary name, fsynced and renamed, then the directory is fsynced.
``retire`` records the retirement in ``state.json`` first and then overwrites and unlinks the
KEK file, so a crash in between leaves a file that ``kek`` refuses and that the next open
removes. Overwriting in place is best effort on copy-on-write or wear-levelled storage; the
retirement is complete once no copy of the KEK file survives (see docs/formats.md §4).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from saihm.keyring.errors import KekUnavailable, KeyringError
from saihm.keyring.wrap import KEK_BYTES

__all__ = ["MAX_KEK_VERSION", "KekDirectory"]

MAX_KEK_VERSION = 2**32 - 1
_STATE = "state.json"
_MEMO = "memo.key"
_LOCK = ".lock"


def _read_all(fd: int, size: int) -> bytes:
    """The ``size`` bytes ``fd`` holds (fewer if it ends first). The state file is replaced,
    never written in place, so an open file keeps the size ``fstat`` gave."""
    chunks, have = [], 0
    while have < size:
        chunk = os.read(fd, size - have)
        if not chunk:
            break
        chunks.append(chunk)
        have += len(chunk)
    return b"".join(chunks)


def _kek_name(version: int) -> str:
    return f"kek-{version:08x}"


class KekDirectory:
    """The KEK generations of one operator. Creating a fresh directory creates generation 1.

    Raises ``KeyringError`` if the directory is readable by group or others, or inconsistent.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._state_path = str(self.path / _STATE)
        self._keks: dict[int, bytes] = {}
        self._memo: bytes | None = None
        #: The checked copy: the state file's (inode, mtime_ns, size) when read, its JSON
        #: object and the bytes it was parsed from; one attribute, replaced whole, so threads
        #: never pair one's sig with another's state.
        self._checked: tuple[tuple[int, int, int] | None, dict[str, Any], bytes] = (None, {}, b"")
        fresh = not (self.path / _STATE).exists()
        if fresh:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            if any(p.name.startswith("kek-") for p in self.path.iterdir()):
                raise KeyringError("KEK directory has KEK files but no state file")
            os.chmod(self.path, 0o700)
        mode = os.stat(self.path).st_mode
        if stat.S_IMODE(mode) & 0o077:
            raise KeyringError("KEK directory is accessible to group or others; chmod 700 it")
        with self._locked():
            if not (self.path / _STATE).exists():
                self._write_file(_MEMO, os.urandom(32))
                self._write_file(_kek_name(1), os.urandom(KEK_BYTES))
                self._write_state({"format": 1, "current": 1, "highest": 1, "retired": []})
            self._finish_retirements()

    def __repr__(self) -> str:
        return f"KekDirectory({str(self.path)!r})"

    # Files -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.path / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _fsync_dir(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _write_file(self, name: str, data: bytes) -> None:
        tmp = self.path / f".{name}.tmp"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path / name)
        self._fsync_dir()

    def _write_state(self, state: dict[str, Any]) -> None:
        self._write_file(_STATE, json.dumps(state, sort_keys=True).encode())
        self._checked = (None, state, b"")

    def _read_state(self, *, fresh: bool = False) -> dict[str, Any]:
        """The state file, re-read whenever it has been replaced (another process may rotate).

        ``fresh`` re-reads it unconditionally: a replaced file can, in principle, reuse an inode
        with the same size and a coarse timestamp, so what decides which generation wraps a key
        never trusts the cached copy. A fresh read opens the file once and takes its signature
        from the open file, so the copy it leaves is keyed on what was read.
        """
        path = self._state_path
        try:
            if not fresh:
                st = os.stat(path)
                sig, state, _ = self._checked
                if sig == (st.st_ino, st.st_mtime_ns, st.st_size):
                    return state
            # Four system calls (the write path makes this read once per transaction); the
            # bytes read are parsed again only when they differ from the last read's.
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                st = os.fstat(fd)
                raw = _read_all(fd, st.st_size)
            finally:
                os.close(fd)
            signature = (st.st_ino, st.st_mtime_ns, st.st_size)
            _, state, parsed_from = self._checked
            if raw and raw == parsed_from:
                self._checked = (signature, state, raw)
                return state
            loaded = json.loads(raw)
            if not isinstance(loaded, dict) or loaded.get("format") != 1:
                raise KeyringError("unknown KEK state format")
            state = cast(dict[str, Any], loaded)
            for v in state["retired"]:
                self._keks.pop(v, None)
            self._checked = (signature, state, raw)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise KeyringError("KEK state file is missing or unreadable") from err
        return state

    def _shred(self, version: int) -> None:
        path = self.path / _kek_name(version)
        try:
            fd = os.open(path, os.O_WRONLY)
        except FileNotFoundError:
            return
        try:
            size = os.fstat(fd).st_size
            os.write(fd, b"\0" * max(size, KEK_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        path.unlink()
        self._fsync_dir()

    def _finish_retirements(self) -> None:
        for v in self._read_state()["retired"]:
            self._shred(v)

    # Public ----------------------------------------------------------------------------------

    @property
    def current_version(self) -> int:
        """The generation in force, as a label (a new cell's kekVersion, the cache's
        generation, the metrics): from the checked copy of the state file, re-read whenever
        the file's (inode, mtime, size) changed. Nothing that wraps a key or retires a
        generation uses it: those read the state afresh (:meth:`current_kek`,
        :meth:`fresh_current_version`)."""
        return int(self._read_state()["current"])

    def fresh_current_version(self) -> int:
        """The generation in force, from a fresh read of the state file (a rotation's check)."""
        return int(self._read_state(fresh=True)["current"])

    def current_kek(self) -> tuple[int, bytes]:
        """The generation in force and its KEK, from one fresh read of the state file.

        This is what a new wrap uses (saihm-protocol "Encryption envelope"). Because the state
        names a new generation before any rotation re-wraps, a writer that reads it inside its
        LMDB write transaction either wraps under the new generation or commits before the
        re-wrap transaction starts and is re-wrapped by it; it never wraps under a generation
        that a rotation has checked and retired. The one read of the state file per wrap.
        """
        state = self._read_state(fresh=True)
        version = int(state["current"])
        return version, self._kek_of(state, version)

    def live_versions(self) -> list[int]:
        """Issued, unretired generations whose KEK file exists, ascending."""
        state = self._read_state()
        retired = set(state["retired"])
        return [
            v
            for v in range(1, state["highest"] + 1)
            if v not in retired and (self.path / _kek_name(v)).exists()
        ]

    def retired_versions(self) -> list[int]:
        """Generations retired so far, ascending."""
        return sorted(self._read_state()["retired"])

    def kek(self, version: int) -> bytes:
        """The 32-byte KEK of ``version``.

        Raises ``KekUnavailable`` for a generation never issued, retired, or whose file is gone;
        there is no fallback to another generation.
        """
        return self._kek_of(self._read_state(), version)

    def _kek_of(self, state: dict[str, Any], version: int) -> bytes:
        """The KEK of ``version`` as ``state`` (a state file read just now) allows it."""
        if not 1 <= version <= state["highest"] or version in state["retired"]:
            raise KekUnavailable(f"KEK generation {version} is not available")
        key = self._keks.get(version)
        if key is None:
            try:
                key = (self.path / _kek_name(version)).read_bytes()
            except FileNotFoundError as err:
                raise KekUnavailable(f"KEK generation {version} is not available") from err
            if len(key) != KEK_BYTES:
                raise KeyringError(f"KEK file for generation {version} is corrupt")
            self._keks[version] = key
        return key

    def new_generation(self, issued_at: float | None = None) -> int:
        """Issue and put in force a new generation, numbered above every number ever issued.

        ``issued_at`` (UNIX seconds, the caller's clock) is recorded in the state file for the
        rotation schedule. The KEK file is written and fsynced before the state names it, so a
        crash leaves either the old state (and an unused file the next issue overwrites) or
        the new generation in force with its key on disk. Raises ``OSError`` (ENOSPC, EIO)
        unchanged, with the state as it was.
        """
        with self._locked():
            state = dict(self._read_state(fresh=True))
            version: int = state["highest"] + 1
            if version > MAX_KEK_VERSION:
                raise KeyringError("kekVersion space exhausted")
            self._write_file(_kek_name(version), os.urandom(KEK_BYTES))
            state.update(current=version, highest=version)
            retired = set(state["retired"])
            issued = {k: v for k, v in state.get("issued", {}).items() if int(k) not in retired}
            if issued_at is not None:
                issued[str(version)] = float(issued_at)
            state["issued"] = issued
            self._write_state(state)
            return version

    def issued_at(self, version: int) -> float:
        """When generation ``version`` was issued (UNIX s): the clock reading recorded by
        ``new_generation``, else its KEK file's modification time.

        Raises ``KekUnavailable`` for a generation that is retired or was never issued.
        """
        recorded = self._read_state(fresh=True).get("issued", {}).get(str(version))
        if recorded is not None:
            return float(recorded)
        try:
            return os.stat(self.path / _kek_name(version)).st_mtime
        except OSError as err:
            raise KekUnavailable(f"KEK generation {version} is not available") from err

    def retire(self, version: int, hook: Callable[[str], None] | None = None) -> None:
        """Record ``version`` retired, then overwrite and unlink its KEK file.

        The caller MUST first re-wrap every key held under it and check that none remains
        (``Keyring.rotate`` does both under the rotation lock). Raises ``KeyringError`` for the
        generation in force and ``KekUnavailable`` for one never issued; retiring a retired
        generation only finishes shredding its file. ``hook("retire_recorded")`` runs between
        recording and shredding (crash tests).
        """
        with self._locked():
            state = dict(self._read_state(fresh=True))
            if not 1 <= version <= state["highest"]:
                raise KekUnavailable(f"KEK generation {version} was never issued")
            if version == state["current"]:
                raise KeyringError("cannot retire the KEK generation in force")
            if version not in state["retired"]:
                state["retired"] = sorted([*state["retired"], version])
                state.get("issued", {}).pop(str(version), None)
                self._write_state(state)
            self._keks.pop(version, None)
            if hook is not None:
                hook("retire_recorded")
            self._shred(version)

    def finish_retirements(self) -> None:
        """Shred the file of every generation the state records as retired (after a crash
        between recording a retirement and shredding its file)."""
        with self._locked():
            self._finish_retirements()

    def memo_key(self) -> bytes:
        """The 32-byte HMAC key for the verified-cell memo (kept here, never in LMDB)."""
        if self._memo is None:
            try:
                memo = (self.path / _MEMO).read_bytes()
            except OSError as err:
                raise KeyringError("memo key is missing") from err
            if len(memo) != 32:
                raise KeyringError("memo key is corrupt")
            self._memo = memo
        return self._memo
