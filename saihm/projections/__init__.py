"""saihm.projections."""
