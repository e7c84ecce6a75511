"""Errors raised by ``saihm.keyring``; children of the one root in ``saihm.errors``."""

from __future__ import annotations

from saihm.errors import SaihmError, VerificationFailed

__all__ = ["KekUnavailable", "KeyringError", "RotationBusy", "UnwrapError"]


class KeyringError(SaihmError):
    """The KEK directory is missing, unsafe or inconsistent (500)."""

    code = "keyring_error"


class KekUnavailable(KeyringError):
    """A KEK generation that was never issued or has been retired; never falls back (500)."""

    code = "kek_unavailable"


class RotationBusy(KeyringError):
    """Another process holds the rotation lock (``saihm kek rotate`` while one is running)."""

    status = 503
    code = "kek_rotation_busy"


class UnwrapError(VerificationFailed):
    """A wrapped key that does not unwrap under its KEK generation (RFC 3394 integrity check)."""

    code = "unwrap_failed"
