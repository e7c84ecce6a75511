"""The store's read side (docs/internals.md "The store"): the one checked read path.

- :mod:`~saihm.store.read.views`: the read path's result types (``CellHeader``, ``OpenedCell``,
  ``Page``);
- :mod:`~saihm.store.read.cache`: the in-process cache of verified cells and the per-holder
  index over them (it caches; :mod:`saihm.retrieval.holder` ranks);
- :mod:`~saihm.store.read.candidates`: which cells a read considers;
- :mod:`~saihm.store.read.holderwide`: ``ReadRequest`` and the holder-wide fast path;
- :mod:`~saihm.store.read.reader`: ``CheckedReader``, the only path that returns plaintext;
- :mod:`~saihm.store.read.warm`: the cache's embedding worker.

Nothing is imported here, so the write side may import the result types without loading the
reader; callers outside the store import from :mod:`saihm.store`.
"""
