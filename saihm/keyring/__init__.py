"""saihm.keyring: KEK generations, wrapped DEKs and holder seeds, rotation and destruction.

Imports only ``saihm.errors`` and the storage interface (``saihm.storage.base``) from saihm
(DESIGN.md "Layers"); the Store owns the storage and passes it, or a transaction, in.
"""

from saihm.keyring.errors import KekUnavailable, KeyringError, RotationBusy, UnwrapError
from saihm.keyring.kekdir import KekDirectory
from saihm.keyring.keyring import Keyring, new_dek, new_holder_seed, rotate
from saihm.keyring.wrap import unwrap, wrap

__all__ = [
    "KekDirectory",
    "KekUnavailable",
    "Keyring",
    "KeyringError",
    "RotationBusy",
    "UnwrapError",
    "new_dek",
    "new_holder_seed",
    "rotate",
    "unwrap",
    "wrap",
]
