"""The one error root of saihm and its few meaningful children.

Each class maps to one HTTP status at the edge; each raise site may narrow the protocol error
code (for example ``NotPermitted("...", code="not_holder")``). Messages never carry secrets,
plaintext, tokens or query text: they may reach a client.
"""

from __future__ import annotations

import functools
import struct
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar


class ErrorCode(StrEnum):
    """Every error code saihm itself sends or prints: the protocol's codes (saihm-protocol, each
    tool's "Errors") and saihm's extension codes, as docs/formats.md §6 lists them, plus the
    codes of the command line and the background jobs.

    A member is a ``str``, so it renders as its value in JSON (``{"error": "not_holder"}``).
    tests/http/test_error_codes.py fails on a code raised anywhere in saihm (the client and MCP
    client excepted: they relay codes) that is not a member, and on a member of the table in
    docs/formats.md §6 that is missing here.
    """

    BAD_NAMESPACE = "bad_namespace"
    BAD_NOTE = "bad_note"
    BAD_ORIGIN = "bad_origin"
    BAD_REQUEST = "bad_request"
    CELL_ID_MISMATCH = "cell_id_mismatch"
    CEREMONY_REFUSED = "ceremony_refused"
    CONFIG = "config"
    CONFLICT = "conflict"
    CONSUMER_MISMATCH = "consumer_mismatch"
    CONTRACT_NOT_FOUND = "contract_not_found"
    CONTRACT_REVOKED = "contract_revoked"
    DECRYPT_FAILED = "decrypt_failed"
    DISABLED = "disabled"
    EMPTY_CONTENT = "empty_content"
    ERASED = "erased"
    GOVERNANCE_DISABLED = "governance_disabled"
    GRANT_NOT_FOUND = "grant_not_found"
    HOLDER_NOT_FOUND = "holder_not_found"
    INELIGIBLE_PROPOSER = "ineligible_proposer"
    INELIGIBLE_VOTER = "ineligible_voter"
    INTERNAL = "internal"
    INVALID_CURSOR = "invalid_cursor"
    INVALID_EXPIRY = "invalid_expiry"
    INVALID_FILTER = "invalid_filter"
    INVALID_GRANTEE = "invalid_grantee"
    INVALID_KIND = "invalid_kind"
    INVALID_LIMIT = "invalid_limit"
    INVALID_MODE = "invalid_mode"
    INVALID_SCOPE = "invalid_scope"
    INVALID_TOKEN = "invalid_token"
    KEK_ROTATION_BUSY = "kek_rotation_busy"
    KEK_UNAVAILABLE = "kek_unavailable"
    KEYRING_ERROR = "keyring_error"
    LINK_REFUSED = "link_refused"
    MALFORMED_CBOR = "malformed_cbor"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    MISSING_PARAM = "missing_param"
    MODE_NOT_GRANTED = "mode_not_granted"
    NAMESPACE_NOT_GRANTED = "namespace_not_granted"
    NO_SESSION = "no_session"
    NO_VAULT = "no_vault"
    NOT_CONSUMER = "not_consumer"
    NOT_FOUND = "not_found"
    NOT_GRANTEE = "not_grantee"
    NOT_HOLDER = "not_holder"
    NOT_PERMITTED = "not_permitted"
    OPERATOR_LOG_UNAVAILABLE = "operator_log_unavailable"
    OPERATOR_STORAGE_FULL = "operator_storage_full"
    OPERATOR_STORAGE_UNAVAILABLE = "operator_storage_unavailable"
    PASSKEY_REFUSED = "passkey_refused"
    PENDING_FULL = "pending_full"
    PROPOSAL_CLOSED = "proposal_closed"
    PROPOSAL_NOT_FOUND = "proposal_not_found"
    RATE_LIMITED = "rate_limited"
    RECEIPT_NOT_FOUND = "receipt_not_found"
    RECORD_CONFLICT = "record_conflict"
    RECORD_ENDED = "record_ended"
    RETRY = "retry"
    SEMANTIC_UNAVAILABLE = "semantic_unavailable"
    SHARD_NOT_FOUND = "shard_not_found"
    TOKEN_EXPIRED = "token_expired"
    TOKEN_TOO_LONG = "token_too_long"
    TOO_LARGE = "too_large"
    UNAUTHENTICATED = "unauthenticated"
    UNENCODABLE = "unencodable"
    UNKNOWN_METHOD = "unknown_method"
    UNKNOWN_PARAM = "unknown_param"
    UNKNOWN_SCOPE = "unknown_scope"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    UNWRAP_FAILED = "unwrap_failed"
    VERIFICATION_FAILED = "verification_failed"
    WITNESS_FAILED = "witness_failed"


class SaihmError(Exception):
    """Root of every error saihm raises on purpose."""

    status = 500
    code: str = ErrorCode.INTERNAL

    def __init__(self, message: str = "", *, code: str | None = None) -> None:
        super().__init__(message or self.code)
        if code is not None:
            self.code = code


class CommandError(SaihmError):
    """A command's error with its own exit status: raised by a command, printed as one line
    by the one printer (saihm/commands/main.py). Every other ``SaihmError`` exits 2."""

    def __init__(self, message: str, *, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


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

#: What malformed arguments provoke inside a parser or constructor: a wrong type given to an
#: operator or a built-in, a bad length, bytes that do not decode or unpack, a value out of range
#: (``ValueError`` covers ``UnicodeDecodeError``, ``binascii.Error`` and pydantic's
#: ``ValidationError``). Not ``AttributeError`` or ``KeyError``: those are a bug in the parser
#: (a parser that reads an attribute or a key of its input checks for it first, see
#: ``require_type``), and a bug must crash, not pass for a bad input.
_LOW_LEVEL = (TypeError, ValueError, IndexError, OverflowError, struct.error)


def _low_level(err: Exception) -> bool:
    """Whether ``err`` is one of ``_LOW_LEVEL`` or cbor2's decode error.

    cbor2 is looked up, not imported: the client and MCP packages import this module and must
    not load cbor2 (tests/test_layers.py), and where cbor2 was never imported nothing can have
    raised its error.
    """
    if isinstance(err, _LOW_LEVEL):
        return True
    cbor2 = sys.modules.get("cbor2")
    return cbor2 is not None and isinstance(err, cbor2.CBORDecodeError)


def rejects(error: type[SaihmError] = MalformedInput, what: str = "") -> Callable[[_F], _F]:
    """Decorate a public parser, constructor or helper of the core so that it has one error root.

    A ``SaihmError`` passes unchanged; a low-level error that malformed arguments provoke
    (``TypeError``, ``ValueError``, ``IndexError``, ``OverflowError``, ``struct.error``,
    ``cbor2.CBORDecodeError``) leaves as ``error`` (default ``MalformedInput``), chained with
    ``raise ... from``. The message names ``what`` (default: the function) and the kind of
    defect, never the argument's value, which may be secret. Anything else, ``AttributeError``
    and ``KeyError`` included, is a bug and propagates unchanged.
    """

    def decorate(fn: _F) -> _F:
        name = what or fn.__qualname__

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except SaihmError:
                raise
            except Exception as err:
                if not _low_level(err):
                    raise
                raise error(f"{name}: malformed argument ({type(err).__name__})") from err

        return checked  # type: ignore[return-value]

    return decorate


def require_type(
    value: object,
    kind: type | tuple[type, ...],
    what: str,
    error: type[SaihmError] = MalformedInput,
) -> None:
    """Raise ``error`` unless ``value`` is an instance of ``kind``.

    The explicit first check of a parser on an argument whose methods or attributes it uses:
    a wrong type is then malformed input, while an ``AttributeError`` raised further in stays a
    bug (``rejects`` lets it through). ``what`` names the function and the argument; the message
    gives the types, never the value.
    """
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        names = " or ".join(k.__name__ for k in kinds)
        raise error(f"{what} must be {names}, not {type(value).__name__}")
