"""saihm.services: the long-running servers beside the operator, on the top floor with the HTTP
edge they use. ``authority`` is ``saihm authority serve`` (docs/authority.md); it stands here,
not in ``saihm.authority``, because it composes an operator and serves HTTP, while the
operator's composition (saihm.compose) imports the authority's key and actions."""
