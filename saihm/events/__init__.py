"""saihm.events."""
