"""saihm: a custodial SAIHM operator for AI-agent memory.

Every operation is a signed CBOR event whose receipt is a leaf of an RFC 6962 Merkle log with
signed checkpoints; projections are rebuilt from the log; erasure destroys keys, never events.
"""

__version__ = "0.1.0"
