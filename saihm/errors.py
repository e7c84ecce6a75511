"""The one error root of saihm and its few meaningful children.

Each class maps to one HTTP status at the edge; each raise site may narrow the protocol error
code (for example ``NotPermitted("...", code="not_holder")``). Messages never carry secrets,
plaintext, tokens or query text: they may reach a client.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any, TypeVar


class SaihmError(Exception):
    """Root of every error saihm raises on purpose."""

    status = 500
    code = "internal"

    def __init__(self, message: str = "", *, code: str | None = None) -> None:
        super().__init__(message or self.code)
        if code is not None:
            self.code = code


class MalformedInput(SaihmError):
    """Input that does not parse or breaks a stated rule (400)."""

    status = 400
    code = "bad_request"


class TooLarge(MalformedInput):
    """A request or value over a stated size bound (413)."""

    status = 413
    code = "too_large"


class Unauthenticated(SaihmError):
    """No capability, or one that is invalid, expired or revoked (401)."""

    status = 401
    code = "unauthenticated"


class NotPermitted(SaihmError):
    """An authenticated caller asking for something its capability does not cover (403)."""

    status = 403
    code = "not_permitted"


class NotFound(SaihmError):
    """A named object that does not exist (404)."""

    status = 404
    code = "not_found"


class Conflict(SaihmError):
    """A request that contradicts the current state (409)."""

    status = 409
    code = "conflict"


class VerificationFailed(SaihmError):
    """Stored or presented data whose hash, signature or proof does not verify."""

    status = 500
    code = "verification_failed"


class Unavailable(SaihmError):
    """Storage or the log could not be reached; see the protocol's order of effect (503)."""

    status = 503
    code = "operator_storage_unavailable"


class Disabled(SaihmError):
    """A tool the operator has not enabled, such as governance (501)."""

    status = 501
    code = "disabled"


def os_message(err: OSError) -> str:
    """One line for an OS error, for a person: ``FILE: reason`` without ``[Errno N]``.

    A full disk says so and that the failed write changed nothing it reports on.
    """
    import errno
    import os

    if err.errno == errno.ENOSPC:
        reason = "no space left on the device"
    elif err.strerror:
        reason = err.strerror
    elif err.errno:
        reason = os.strerror(err.errno)
    else:
        reason = str(err) or type(err).__name__
    return f"{err.filename}: {reason}" if err.filename is not None else reason


def message(err: BaseException) -> str:
    """``os_message`` for an OS error, else the error's own text."""
    return os_message(err) if isinstance(err, OSError) else str(err)


_F = TypeVar("_F", bound=Callable[..., Any])

#: What malformed arguments provoke inside a parser or constructor: a wrong type, a bad length,
#: bytes that do not unpack, a value out of range (pydantic's ValidationError is a ValueError).
_LOW_LEVEL = (
    TypeError,
    ValueError,
    AttributeError,
    KeyError,
    IndexError,
    OverflowError,
    struct.error,
)


def rejects(error: type[SaihmError] = MalformedInput, what: str = "") -> Callable[[_F], _F]:
    """Decorate a public parser, constructor or helper of the core so that it has one error root.

    A ``SaihmError`` passes unchanged; a low-level error that malformed arguments provoke
    (``TypeError``, ``ValueError``, ``AttributeError``, ``KeyError``, ``IndexError``,
    ``OverflowError``, ``struct.error``) leaves as ``error`` (default ``MalformedInput``),
    chained with ``raise ... from``. The message names ``what`` (default: the function) and the
    kind of defect, never the argument's value, which may be secret.
    """

    def decorate(fn: _F) -> _F:
        name = what or fn.__qualname__

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except SaihmError:
                raise
            except _LOW_LEVEL as err:
                raise error(f"{name}: malformed argument ({type(err).__name__})") from err

        return checked  # type: ignore[return-value]

    return decorate
