"""Wrapped DEKs and holder seeds (DESIGN.md "Data at rest"; saihm-protocol "Erasure").

Namespaces of a storage the Store owns (saihm/storage; the Keyring never opens one):

- ``deks``:  cellId (32 bytes) → kekVersion_be32 || RFC 3394 wrap of the 32-byte DEK;
- ``seeds``: holderId (32 bytes) → kekVersion_be32 || RFC 3394 wrap of the 32-byte holder seed.

The kekVersion stored here names the generation that wrapped the key; it changes on re-wrap,
unlike the cell's own kekVersion. Deleting a ``deks`` entry is the erasure; it becomes complete
when the generation in force at that moment is retired (``rotate``), because every older copy of
the wrapped DEK (free pages, backups, replicas) was wrapped under a retired generation.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterator

from saihm.errors import Conflict, MalformedInput, NotFound
from saihm.keyring.errors import KeyringError, UnwrapError
from saihm.keyring.kekdir import KekDirectory
from saihm.keyring.lock import rotation_lock
from saihm.keyring.wrap import unwrap, wrap
from saihm.storage.base import Namespace, ReadTxn, Storage, WriteTxn

__all__ = ["Keyring", "new_dek"]

_KEY_BYTES = 32
_REWRAP_CHUNK = 4096  # re-wrapped values written per scan (bounds memory on a large keyring)
log = logging.getLogger("saihm.keyring")


def new_dek() -> bytes:
    """A fresh 32-byte DEK from ``os.urandom``; never derived from any other secret."""
    return os.urandom(_KEY_BYTES)


def _check32(value: bytes, what: str) -> None:
    if not isinstance(value, bytes) or len(value) != _KEY_BYTES:
        raise MalformedInput(f"{what} must be 32 bytes")


class Keyring:
    """Key storage over a storage owned by someone else; every method takes a transaction.

    Call ``rotate`` outside any open transaction of the same thread: it begins its own write
    transactions (the storage allows one at a time).
    """

    DB_NAMES: tuple[bytes, ...] = (b"deks", b"seeds")

    def __init__(self, storage: Storage, kek_dir: KekDirectory) -> None:
        """Use the namespaces of ``DB_NAMES`` in ``storage`` (opened with them)."""
        self._storage = storage
        self.kek_dir = kek_dir
        self._deks = storage.namespace(b"deks")
        self._seeds = storage.namespace(b"seeds")

    def __repr__(self) -> str:
        return f"Keyring({self.kek_dir!r})"

    # Wrapping ---------------------------------------------------------------------------------

    def current_kek(self) -> tuple[int, bytes]:
        """The generation in force and its KEK, from a fresh read of the KEK state.

        A writer that wraps several keys in one write transaction may read this once, inside
        that transaction (after it holds the write lock), and pass it to each ``put_dek`` and
        ``put_seed``: a rotation that issued a newer generation before the read is seen, and one
        that issues after it re-wraps every key of the transaction once it commits.
        """
        return self.kek_dir.current_kek()

    def _wrap(self, key: bytes, kek: tuple[int, bytes] | None) -> bytes:
        # Without ``kek``, read the generation in force now, freshly, inside the caller's write
        # transaction: a rotation that issued a newer generation before this read is always
        # seen, and one that issues after it re-wraps this key once this transaction commits.
        version, key_encryption_key = kek if kek is not None else self.kek_dir.current_kek()
        return struct.pack(">I", version) + wrap(key_encryption_key, key)

    def _unwrap(self, value: bytes) -> bytes:
        if len(value) != 4 + _KEY_BYTES + 8:
            raise KeyringError("stored wrapped key has the wrong length")
        (version,) = struct.unpack(">I", value[:4])
        return unwrap(self.kek_dir.kek(version), value[4:])

    # DEKs -------------------------------------------------------------------------------------

    def put_dek(
        self, txn: WriteTxn, cell_id: bytes, dek: bytes, kek: tuple[int, bytes] | None = None
    ) -> None:
        """Store ``dek`` wrapped under the current generation (``kek``, if this transaction
        read it: :meth:`current_kek`); raises ``Conflict`` if the cell already has one."""
        _check32(cell_id, "cellId")
        _check32(dek, "DEK")
        if not txn.put(cell_id, self._wrap(dek, kek), db=self._deks, overwrite=False):
            raise Conflict("cell already has a wrapped DEK")

    def dek(self, txn: ReadTxn, cell_id: bytes) -> bytes:
        """The unwrapped DEK of ``cell_id``.

        Raises ``NotFound(code="erased")`` if no wrapped DEK is stored (destroyed or never
        written), ``KekUnavailable`` if its generation is gone, ``UnwrapError`` if it is damaged.
        """
        value = txn.get(cell_id, db=self._deks)
        if value is None:
            raise NotFound("no wrapped DEK for this cell", code="erased")
        return self._unwrap(bytes(value))

    def has_dek(self, txn: ReadTxn, cell_id: bytes) -> bool:
        """Whether a wrapped DEK is stored for ``cell_id``."""
        return txn.get(cell_id, db=self._deks) is not None

    def destroy(self, txn: WriteTxn, cell_id: bytes) -> bool:
        """Delete the wrapped DEK of ``cell_id``; False if there was none (already erased)."""
        return bool(txn.delete(cell_id, db=self._deks))

    # Seeds ------------------------------------------------------------------------------------

    def put_seed(
        self, txn: WriteTxn, holder_id: bytes, seed: bytes, kek: tuple[int, bytes] | None = None
    ) -> None:
        """Store a holder seed wrapped under the current generation (``kek`` as for
        :meth:`put_dek`); ``Conflict`` if present."""
        _check32(holder_id, "holderId")
        _check32(seed, "holder seed")
        if not txn.put(holder_id, self._wrap(seed, kek), db=self._seeds, overwrite=False):
            raise Conflict("holder already has a seed")

    def seed(self, txn: ReadTxn, holder_id: bytes) -> bytes:
        """The holder seed; raises ``NotFound`` for an unknown holder."""
        value = txn.get(holder_id, db=self._seeds)
        if value is None:
            raise NotFound("unknown holder")
        return self._unwrap(bytes(value))

    # Rotation ---------------------------------------------------------------------------------

    def _entries(self, txn: ReadTxn) -> Iterator[tuple[Namespace, bytes, bytes]]:
        for db in (self._deks, self._seeds):
            for key, value in txn.scan(db):
                yield db, bytes(key), bytes(value)

    def versions_in_use(self, txn: ReadTxn) -> dict[int, int]:
        """How many wrapped keys name each generation (a value too short to name one counts
        under -1)."""
        counts: dict[int, int] = {}
        for _db, _key, value in self._entries(txn):
            v = struct.unpack(">I", value[:4])[0] if len(value) >= 4 else -1
            counts[v] = counts.get(v, 0) + 1
        return counts

    def rewrap_all(self, txn: WriteTxn, to_version: int, damaged: list[bytes] | None = None) -> int:
        """Re-wrap every stored DEK and seed not under ``to_version``; returns how many.

        ``txn`` must be a write transaction. A stored value that does not unwrap (wrong length,
        a generation retired or never issued, a failed RFC 3394 integrity check) is left as it
        is and its key appended to ``damaged``: it is unreadable already, and one damaged entry
        must not stop every later rotation (and with it every erasure). Raises
        ``KekUnavailable`` if the target generation is unavailable.
        """
        target = self.kek_dir.kek(to_version)
        prefix = struct.pack(">I", to_version)
        count = 0
        for db in (self._deks, self._seeds):
            start: bytes | None = b""
            while start is not None:
                # A chunk of re-wrapped values is collected, then written: a scan is not
                # promised to survive writes into the namespace it walks.
                rewrapped: list[tuple[bytes, bytes]] = []
                after = start
                start = None
                for key, raw in txn.scan(db, after):
                    if len(rewrapped) == _REWRAP_CHUNK:
                        start = key
                        break
                    value = bytes(raw)
                    if value[:4] == prefix:
                        continue
                    try:
                        key_bytes = self._unwrap(value)
                    except (KeyringError, UnwrapError):
                        if damaged is not None:
                            damaged.append(bytes(key))
                        continue
                    rewrapped.append((bytes(key), prefix + wrap(target, key_bytes)))
                for key, value in rewrapped:
                    txn.put(key, value, db=db)
                count += len(rewrapped)
        return count

    def rotate(
        self,
        *,
        wait: float | None = None,
        due: Callable[[], bool] | None = None,
        issued_at: float | None = None,
        hook: Callable[[str], None] | None = None,
    ) -> int | None:
        """Issue a new KEK generation, re-wrap every key under it, then retire every older one.

        saihm-protocol "Encryption envelope" (re-wrap before retiring) and "Erasure". The whole
        rotation runs under the rotation lock (:mod:`saihm.keyring.lock`), so two rotations
        never interleave, whichever processes run them. ``wait`` is how long to wait for the
        lock (None: as long as it takes); ``RotationBusy`` if it stays held. ``due``, when
        given, is asked again under the lock and a False answer returns None without rotating
        (the schedule: another process may have just rotated). ``issued_at`` is recorded as the
        new generation's issue time. ``hook(step)`` runs after each step: "locked", "issued",
        "rewrapped", "retire_recorded" (per retired generation), "retired".

        A generation is retired only after a check, inside a write transaction (so no
        writer can wrap meanwhile), that no wrapped DEK or seed names it. Crash-safe at every
        step: the re-wrap commits in one transaction before any retirement; a crash leaves every
        key under a live generation, and the next rotation retires what this one did not.
        Returns the new generation. Raises ``KeyringError`` (after retiring only what is
        unused) if a key is still wrapped under an older generation after the re-wrap.
        """
        step = hook or (lambda name: None)
        with rotation_lock(self.kek_dir.path, wait=wait):
            if due is not None and not due():
                return None
            step("locked")
            version = self.kek_dir.new_generation(issued_at)
            step("issued")
            damaged: list[bytes] = []
            with self._storage.write() as txn:
                self.rewrap_all(txn, version, damaged)
            step("rewrapped")
            stale = self.retire_unused(hook=step)
            step("retired")
        if damaged:
            log.error(
                "KEK rotation: %d stored wrapped keys do not unwrap; left as they are", len(damaged)
            )
        if stale:
            kept = ", ".join(str(v) for v in sorted(stale))
            raise KeyringError(f"keys remain under older KEK generation(s) {kept}; kept live")
        return version

    def retire_unused(self, hook: Callable[[str], None] | None = None) -> dict[int, int]:
        """Retire every live generation older than the one in force that wraps no key.

        Call it under the rotation lock. The check and the retirements happen inside one
        write transaction, which excludes every writer for their duration, and every writer
        reads the generation in force inside its own write transaction
        (``KekDirectory.current_kek``): a key wrapped under a generation is therefore either
        seen by the check, or wrapped under a newer one. Returns the older live generations
        still named by a stored key (none after a complete re-wrap; a damaged entry the re-wrap
        could not open keeps its generation here) with their key counts; those are not retired.
        """
        with self._storage.write() as txn:
            in_use = self.versions_in_use(txn)
            current = self.kek_dir.fresh_current_version()
            live = self.kek_dir.live_versions()
            # Only a live generation can still unwrap anything; a value naming a retired or
            # never-issued one is unreadable whatever is retired.
            stale = {v: n for v, n in in_use.items() if v != current and v in live}
            for old in live:
                if old < current and old not in stale:
                    self.kek_dir.retire(old, hook)
        self.kek_dir.finish_retirements()
        return stale
