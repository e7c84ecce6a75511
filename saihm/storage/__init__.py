"""Ordered key/value namespaces with one writer at a time: the store's only way to its data.

The interface is :mod:`saihm.storage.base`; :func:`open_storage` picks the driver from where
the data is: a directory (LMDB, the embedded default) or a ``postgresql://`` URL.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from saihm.storage.base import (
    MAX_KEY,
    Namespace,
    ReadTxn,
    Storage,
    StorageError,
    StorageFull,
    Usage,
    WriteTxn,
)

__all__ = [
    "MAX_KEY",
    "Namespace",
    "ReadTxn",
    "Storage",
    "StorageError",
    "StorageFull",
    "Usage",
    "WriteTxn",
    "is_url",
    "open_storage",
]

_URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: str | Path) -> bool:
    """True when ``location`` names a PostgreSQL database rather than a directory."""
    return str(location).startswith(_URL_SCHEMES)


def open_storage(
    location: str | Path,
    namespaces: Sequence[bytes],
    *,
    map_size: int = 8 << 30,
    map_size_max: int | None = None,
    readonly: bool = False,
) -> Storage:
    """Open the storage at ``location`` with ``namespaces``.

    A ``postgresql://`` URL opens :class:`saihm.storage.postgres.PostgresStorage` (the
    ``postgresql`` extra); anything else is an LMDB directory (``map_size`` and
    ``map_size_max`` apply to LMDB only).
    """
    if is_url(location):
        try:
            from saihm.storage.postgres import PostgresStorage
        except ImportError as err:
            if err.name and err.name.split(".")[0] in {"psycopg", "psycopg_pool"}:
                raise StorageError(
                    "a PostgreSQL store needs psycopg: pip install 'saihm[postgresql]'"
                ) from None
            raise
        return PostgresStorage(str(location), namespaces, readonly=readonly)
    from saihm.storage.lmdb import LmdbStorage

    return LmdbStorage(
        Path(location),
        namespaces,
        map_size=map_size,
        map_size_max=map_size_max,
        readonly=readonly,
    )
