"""saihm.keyring."""
