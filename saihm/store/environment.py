"""The store's environment: everything one data directory's store is opened with.

The one place that opens the operator's storage (:func:`saihm.storage.open_storage`: LMDB in
``DATA/lmdb`` or PostgreSQL), with every namespace the store and the provider use
(:data:`STORAGE_NAMES`); it honours the store-elsewhere and migrated markers
(saihm/storage/url.py), loads the log keys and the origin (saihm/translog/origin.py), the KEK
directory and keyring, the record seal and the projections. Nothing here reads a cell.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

from saihm.config import Config
from saihm.keyring import KekDirectory, Keyring
from saihm.projections import Projections, RecordSeal, derive_record_key
from saihm.storage import Namespace, Storage, open_storage
from saihm.storage.url import record_store_elsewhere, refuse_migrated, refuse_other_store
from saihm.translog import LogKeys, TreeStorage
from saihm.translog.origin import generate_log_keys, record_origin, recorded_origin, settle_origin

BODIES = b"bodies"  # subjectId -> Body (cell or contract, session tag)
MEMO = b"memo"  # cellId -> HMAC(memo key, stored cell bytes): "this exact cell verified"
STATS = b"stats"  # day u64 -> [calls, within service window]; operational, not derived
CHECKPOINTS = b"checkpoints"  # tree size u64 -> signed checkpoint note
#: The provider's held proposals (saihm/store/held.py reads them; the group commit writes them):
#: proposalId ->
#: {1: cell CBOR, 2: caller's meta}; not a projection.
PENDING = b"provider-pending"
#: The person's passkeys, one-time links and sign-ins (saihm/authority/person.py).
PERSON = b"person"
OWN_DBS = (BODIES, CHECKPOINTS, MEMO, STATS, PENDING, PERSON)

#: Every namespace the store opens its storage with.
STORAGE_NAMES: tuple[bytes, ...] = (
    *TreeStorage.DB_NAMES,
    *Keyring.DB_NAMES,
    *Projections.DB_NAMES,
    *OWN_DBS,
)

FaultHook = Callable[[str], None]


def _no_fault(step: str) -> None:
    """The default fault hook: nothing."""


class Environment:
    """The opened storage of one data directory and what the store's parts share over it."""

    def __init__(
        self,
        config: Config,
        *,
        clock: Callable[[], float] = time.time,
        fault_hook: FaultHook | None = None,
        check_applied: bool = True,
    ) -> None:
        """Open the storage of ``config``; unless ``check_applied`` is False (``saihm rebuild``
        only), refuse with :class:`StaleProjections` when the projections do not reflect the
        whole log (saihm-protocol "Order of effect and receipt")."""
        self.config = config
        self.clock = clock
        self.fault_hook: FaultHook = fault_hook or _no_fault
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.kek_dir = KekDirectory(config.kek_dir)
        if config.store is None:
            refuse_migrated(config.data_dir)  # its store is in PostgreSQL: never an empty LMDB
        else:
            refuse_other_store(config.data_dir, config.store)  # nor another PostgreSQL store
        self.storage: Storage = open_storage(
            config.storage_location,
            STORAGE_NAMES,
            map_size=config.map_size,
            map_size_max=config.map_size_max,
        )
        try:
            self._open_parts(config, check_applied)
        except BaseException:
            # Refused after the storage opened (stale projections, another origin's keys, an
            # unreadable key file): close it, so no connection pool or LMDB handle outlives us.
            self.storage.close()
            raise

    def _open_parts(self, config: Config, check_applied: bool) -> None:
        if config.store is not None:
            record_store_elsewhere(config.data_dir, config.store)
        self.tree = TreeStorage(self.storage)
        self.keyring = Keyring(self.storage, self.kek_dir)
        self._memo_key = self.kek_dir.memo_key()
        self.record_seal = RecordSeal(derive_record_key(self._memo_key))
        self.projections = Projections(self.storage, self.record_seal)
        self.db: dict[bytes, Namespace] = {name: self.storage.namespace(name) for name in OWN_DBS}
        if check_applied:
            self._check_applied()
        self.log_keys = LogKeys.load(config.log_keys_dir)
        #: The log's identity, fixed when the data directory was created (saihm/translog/origin.py).
        self.origin = settle_origin(config.data_dir, config.origin, self.log_keys.origin)
        if not config.verifier_keys_file.exists():
            # Public, and needed by offline tools wherever the signing keys are kept.
            keys = "".join(k + "\n" for k in self.log_keys.verifier_keys())
            config.verifier_keys_file.write_text(keys)
        self.authority_public_key = config.authority_public_key_file.read_bytes()

    def fault(self, step: str) -> None:
        """The fault-injection point of the crash tests (``fault_hook``); nothing otherwise."""
        self.fault_hook(step)

    def _check_applied(self) -> None:
        """Refuse to serve projections that do not reflect the whole log, or of another format.

        Raises :class:`StaleProjections` naming ``saihm rebuild --replace``. A fresh store
        (empty log, no projections) passes.
        """
        with self.storage.read() as txn:
            size = self.tree.size(txn)
            state = self.projections.state(txn)
        state.require_current(size)

    def memo(self, cell_bytes: bytes) -> bytes:
        """The verified-cell memo of ``cell_bytes``: an HMAC under a key of the KEK directory,
        so only this store can write one that a later read accepts."""
        return hmac.digest(self._memo_key, b"cell" + cell_bytes, "sha256")

    def session_tag(self, holder_id: bytes, session_id: bytes) -> bytes:
        """The private index key of one holder's session (an untrusted lookup hint)."""
        return hmac.digest(self._memo_key, b"session" + holder_id + session_id, "sha256")

    def close(self) -> None:
        """Close the storage."""
        self.storage.close()


def initialise(config: Config, authority_public_key: bytes) -> None:
    """Create a data directory's log keys and pin the authority key (first run only)."""
    config.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not config.log_keys_dir.exists():
        generate_log_keys(recorded_origin(config.data_dir) or config.origin).save(
            config.log_keys_dir
        )
    record_origin(config.data_dir, LogKeys.load(config.log_keys_dir).origin)
    if not config.authority_public_key_file.exists():
        config.authority_public_key_file.write_bytes(authority_public_key)
    KekDirectory(config.kek_dir)
