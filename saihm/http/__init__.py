"""saihm.http."""
