"""The explicit configuration object every entry point builds first (no env reads elsewhere)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DAY = 86_400
#: The authority's private seed, in its own directory (saihm.authority.authority), and its public
#: key, beside it and pinned in the data directory. ``saihm backup`` knows the seed by this name
#: wherever it lies, and leaves it out.
AUTHORITY_SEED_FILE = "authority.seed"
AUTHORITY_PUBLIC_FILE = "authority.pub"


@dataclass(frozen=True)
class Config:
    """Where things live and the operator's published policy.

    ``map_size`` is the LMDB map a store opens with (bytes); it grows by doubling, when a write
    needs more, up to ``map_size_max``; writes are refused (503) beyond it and whenever the data
    volume has less than ``min_free_disk`` bytes free (docs/operations.md "Storage limits").

    ``kek_dir`` and ``authority_dir`` default to siblings of the data directory
    (``<data>/../kek``, ``<data>/../authority``) and ``log_keys_dir`` to ``<data>/log-keys``;
    production puts them on other volumes or machines (docs/operations.md).

    ``origin`` is the log's identity (saihm/translog/origin.py, docs/formats.md §2): None until the
    data directory records one; :meth:`for_data` fills in the recorded origin. ``witnesses``
    are ``URL=VKEY`` strings, the witnesses each new checkpoint is submitted to
    (docs/operations.md "Witnesses").
    """

    data_dir: Path
    kek_dir: Path
    authority_dir: Path
    log_keys_dir: Path
    origin: str | None = None
    witnesses: tuple[str, ...] = ()
    tier: str = "STANDARD"
    map_size: int = 8 << 30
    map_size_max: int = 256 << 30
    #: Where the log and private state live: None for LMDB in ``DATA/lmdb`` (the embedded
    #: default), or a ``postgresql://`` URL (saihm.storage; docs/scaling.md).
    store: str | None = None
    min_free_disk: int = 256 << 20
    checkpoint_interval: float = 1.0
    recall_receipts: bool = True
    status_receipts: bool = True
    #: Retired (``saihm serve --person-actions`` prints a notice): the person acts with a
    #: passkey, never an agent's token (docs/authority.md).
    person_actions: bool = False
    governance: bool = True
    voting_window: int = 7 * DAY
    temporary_default_ttl: int = DAY
    token_ttl: int = 30 * DAY
    service_window_ms: int = 2_000
    kek_rotation_hours: int = 24
    #: Per-token request rate (tokens per second refilled) and burst; 0 disables
    #: (saihm.http.limits; per serving process).
    rate_limit: float = 50.0
    rate_burst: int = 200
    #: Pending RFC 0007 write proposals: most held per consumer, and their lifetime in seconds.
    pending_max: int = 100
    pending_ttl: int = 7 * DAY
    recall_cache_mb: int = 256
    embedding_model: Path | None = None
    governable: dict[str, str] = field(
        default_factory=lambda: {
            "kek_rotation_hours": "hours between KEK retirements (integer, 1..168)",
            "temporary_default_ttl": "default TEMPORARY contract lifetime in seconds (1..86400)",
        }
    )

    @classmethod
    def for_data(
        cls,
        data_dir: str | Path,
        kek_dir: str | Path | None = None,
        authority_dir: str | Path | None = None,
        log_keys_dir: str | Path | None = None,
        **options: object,
    ) -> Config:
        """The configuration for one data directory, with the default sibling directories.

        The origin is the one the data directory records; an ``origin`` option that names
        another raises :class:`~saihm.errors.Conflict` (an origin cannot change). ``witnesses``
        (``URL=VKEY`` strings) are checked and normalised; a bad one, or two naming one witness,
        raises :class:`~saihm.errors.MalformedInput`.
        """
        from saihm.translog.origin import check_origin, recorded_origin

        data = Path(data_dir).absolute()
        recorded = recorded_origin(data)
        requested = options.get("origin")
        if requested is not None:
            check_origin(str(requested))
            if recorded is not None and requested != recorded:
                from saihm.errors import Conflict

                raise Conflict(
                    f"this data directory's log is {recorded}; --origin {requested} names "
                    "another (a log's origin cannot change)"
                )
        options["origin"] = recorded if recorded is not None else requested
        if options.get("witnesses"):
            from saihm.translog.witness import parse_witnesses

            specs = options["witnesses"]
            assert isinstance(specs, (list, tuple))
            options["witnesses"] = tuple(w.spec for w in parse_witnesses(specs))
        kek = Path(kek_dir).absolute() if kek_dir else data.parent / "kek"
        authority = Path(authority_dir).absolute() if authority_dir else data.parent / "authority"
        log_keys = Path(log_keys_dir).absolute() if log_keys_dir else data / "log-keys"
        return cls(
            data_dir=data,
            kek_dir=kek,
            authority_dir=authority,
            log_keys_dir=log_keys,
            **options,  # type: ignore[arg-type]
        )

    @property
    def storage_location(self) -> str | Path:
        """What :func:`saihm.storage.open_storage` opens: the URL, or the LMDB directory."""
        return self.store if self.store is not None else self.lmdb_dir

    @property
    def lmdb_dir(self) -> Path:
        """The LMDB environment."""
        return self.data_dir / "lmdb"

    @property
    def verifier_keys_file(self) -> Path:
        """The log's public checkpoint verifier keys, kept in the data directory wherever the
        signing keys live, so offline tools (``saihm export``, ``saihm verify --data``) find
        them."""
        return self.data_dir / "checkpoint-verifier-keys.txt"

    @property
    def authority_public_key_file(self) -> Path:
        """The only authority material the serving process reads."""
        return self.data_dir / AUTHORITY_PUBLIC_FILE
