"""saihm.provider."""
