"""saihm.offline: tools run against a stopped store's files, not through a running operator.

- :mod:`~saihm.offline.fsck` is the private half of ``saihm verify --data DIR``: it checks, in
  one read snapshot, everything only the operator sees (projections, tiles, bodies, wrapped
  DEKs and seeds, held proposals) against the log, and writes nothing;
- :mod:`~saihm.offline.backup` is ``saihm backup``: a compacted copy of one read snapshot of a
  data directory, without key material;
- :mod:`~saihm.offline.migrate` is ``saihm migrate``: every namespace of an LMDB store copied
  into an empty PostgreSQL one in one transaction.

The package sits one floor above :mod:`saihm.store` (docs/internals.md "Floors"): what it needs
of the store's internals (namespace names, :class:`~saihm.store.Store` for a scratch rebuild)
it imports from ``saihm.store``, and nothing below imports it; the command line calls it.
"""
