"""saihm.services: the long-running servers beside the operator, on the top floor with the HTTP
edge they use. ``authority`` is ``saihm authority serve`` (docs/authority.md) and ``witness``
is ``saihm witness serve`` (a c2sp.org/tlog-witness). They stand here, not in
``saihm.authority`` and ``saihm.witness``, because they serve HTTP (and the authority's
composes an operator), while those packages are imported by the operator's composition and by
the HTTP edge."""
