"""saihm.audit."""
