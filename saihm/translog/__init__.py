"""saihm.translog."""
