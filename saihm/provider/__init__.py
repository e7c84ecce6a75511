"""RFC 0007 Memory Provider API and ``local-vault``, its reference provider over the store.

Modules: ``models`` (pydantic types of the RFC), ``interface`` (the ``MemoryProvider``
Protocol), ``vault`` (``LocalVault`` and the consumer-bound ``ConsumerProvider``), ``pending``
(held write proposals), ``graph`` (entity-relationship view built per call), ``records`` (the
sealed record form), ``meta`` (the vault metadata file), ``cli`` (``saihm memory``), ``http``
(``add_routes(app, vault)``), ``mcp`` (``saihm memory mcp``, a client of ``/memory/v1`` that
imports no store code), ``registry`` (``providers.json``). See docs/memory-provider.md.
Nothing is imported here.
"""
