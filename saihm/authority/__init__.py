"""saihm.authority."""
