"""Pure client checks of the SAIHM custodial profile, one small function per rule.

Every function here is side-effect free and imports nothing but the standard library,
``saihm.errors`` and the client library's wire rules (``saihm.client._wire``, ``_checks``),
which it shares. The operator is untrusted (saihm-protocol: "Hostile or faulty responses"):
these functions decide what of its answer may be believed and printed.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from saihm.client import _checks
from saihm.client._wire import (
    has_forbidden_char,
    is_result_identifier,
    normalise_excerpt,
    parse_bool,
    parse_number,
    printable,
    result_identifier,
)
from saihm.client.errors import ClientError
from saihm.errors import MalformedInput

__all__ = [
    "Refused",
    "check_content",
    "check_expiry_epoch",
    "check_grantees",
    "check_proposal",
    "check_shard_ids",
    "frame_plaintext",
    "has_forbidden_char",
    "is_result_identifier",
    "is_shared_by_other_holder",
    "iso_utc",
    "normalise_excerpt",
    "parse_bool",
    "parse_number",
    "printable",
    "result_identifier",
]


class Refused(MalformedInput):
    """A tool call the client refuses before sending anything (saihm-protocol: "Client checks").

    The message is written by the client and never quotes the refused value.
    """

    code = "refused_before_sending"


P = ParamSpec("P")
T = TypeVar("T")


def frame_plaintext(plaintext: str, prefix: str = "    | ") -> str:
    """Recall plaintext framed so no line break in it can start a new report entry.

    saihm-protocol "Client conformance" 8: every line, the first included, starts with
    ``prefix``. Lines are split at every break ``str.splitlines`` knows, a superset of CR,
    LF, VT, FF, U+0085, U+2028 and U+2029. The structured result keeps the plaintext unaltered.
    """
    lines = plaintext.splitlines() or [""]
    return "\n".join(prefix + line for line in lines)


def iso_utc(seconds: float | None) -> str | None:
    """UNIX ``seconds`` as ISO 8601 UTC (``2026-12-31T09:41:27Z``), or ``None`` for an absent
    or unrepresentable value (negative, or past the year 9999)."""
    if seconds is None or not 0 <= seconds < 253_402_300_800:
        return None
    moment = datetime.datetime.fromtimestamp(int(seconds), tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def is_shared_by_other_holder(holder_id_hex: Any, caller_id: str | None) -> bool:
    """Whether a recalled cell is marked as shared by another holder.

    saihm-protocol "Client conformance" 9: marked when ``holderIdHex`` is absent, not a
    string, or differs from the caller's holderId without regard to case, and always while
    the caller's holderId is unknown.
    """
    if caller_id is None or not isinstance(holder_id_hex, str):
        return True
    return holder_id_hex.lower() != caller_id.lower()


# Checks before sending (saihm-protocol: each tool's "Client checks"): the client library's
# rules, with its refusal turned into :class:`Refused` (same message).


def _refusing(check: Callable[P, T]) -> Callable[P, T]:
    @functools.wraps(check)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return check(*args, **kwargs)
        except ClientError as err:
            raise Refused(str(err)) from err

    return wrapper


check_content = _refusing(_checks.check_content)
check_grantees = _refusing(_checks.check_grantees)
check_shard_ids = _refusing(_checks.check_shard_ids)
check_expiry_epoch = _refusing(_checks.check_expiry_epoch)
check_proposal = _refusing(_checks.check_proposal)
