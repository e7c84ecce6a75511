"""Pure client checks of the SAIHM custodial profile, one small function per rule.

Every function here is side-effect free and imports nothing but the standard library and
``saihm.errors``. The operator is untrusted (saihm-protocol: "Hostile or faulty responses"):
these functions decide what of its answer may be believed and printed.
"""

from __future__ import annotations

import math
import re
from typing import Any

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


# saihm-protocol "Client conformance" 7: control characters (C0, DEL, C1), the line and
# paragraph separators, and the bidirectional controls.
_FORBIDDEN = re.compile("[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_IDENTIFIER = re.compile("[\u0021-\u007e]{1,256}")
_DECIMAL = re.compile(r"-?[0-9]{1,40}(?:\.[0-9]{1,40})?")
_DIGITS = re.compile(r"[0-9]{1,40}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")

_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


def has_forbidden_char(text: str) -> bool:
    """Whether ``text`` holds a character conformance item 7 forbids printing.

    Those are U+0000-U+001F, U+007F-U+009F, U+2028, U+2029, U+202A-U+202E and U+2066-U+2069.
    """
    return _FORBIDDEN.search(text) is not None


def printable(value: Any) -> str | None:
    """The operator-supplied ``value`` if it is a string safe to print, else ``None`` (omit it).

    saihm-protocol "Client conformance" 7: a string holding a control, separator or bidi
    character is omitted whole, never cleaned and never partly printed.
    """
    if not isinstance(value, str) or has_forbidden_char(value):
        return None
    return value


def is_result_identifier(value: Any) -> bool:
    """saihm-protocol "Result identifiers": a JSON string of 1 to 256 characters U+0021-U+007E."""
    return isinstance(value, str) and _IDENTIFIER.fullmatch(value) is not None


def result_identifier(value: Any) -> str | None:
    """``value`` unaltered (never truncated) when it is a valid result identifier, else ``None``."""
    return value if is_result_identifier(value) else None


def parse_bool(value: Any) -> bool | None:
    """A protocol boolean, or ``None`` when ``value`` is not a recognizable one.

    saihm-protocol "HTTPS binding": a client MUST accept true, false, "true", "false", 1, 0,
    "1" and "0" for every boolean field. Nothing else is a boolean (not 2, 1.0, "yes", "TRUE").
    """
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):
        return value == 1
    if isinstance(value, str):
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    return None


def parse_number(value: Any) -> int | float | None:
    """A protocol number, or ``None`` when ``value`` is neither a JSON number nor a decimal string.

    saihm-protocol "HTTPS binding": a client MUST accept either a JSON number or a decimal
    string for every numeric field. Booleans, NaN, infinities, exponents and strings with
    signs other than a leading minus or with spaces are not numbers here.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return float(value) if "." in value else int(value)
    return None


def normalise_excerpt(text: str, limit: int = 80) -> str | None:
    """A short excerpt of a non-JSON body, safe to print, or ``None`` when it must be omitted.

    Runs of white space (line breaks included) become one space, the result is cut to
    ``limit`` characters, and it is then printed only if conformance item 7 allows it.
    """
    collapsed = " ".join(text.split())[:limit]
    return printable(collapsed) if collapsed else None


def frame_plaintext(plaintext: str, prefix: str = "    | ") -> str:
    """Recall plaintext framed so no line break in it can start a new report entry.

    saihm-protocol "Client conformance" 8: every line, the first included, starts with
    ``prefix``. Lines are split at every break ``str.splitlines`` knows, a superset of CR,
    LF, VT, FF, U+0085, U+2028 and U+2029. The structured result keeps the plaintext unaltered.
    """
    lines = plaintext.splitlines() or [""]
    return "\n".join(prefix + line for line in lines)


def is_shared_by_other_holder(holder_id_hex: Any, caller_id: str | None) -> bool:
    """Whether a recalled cell is marked as shared by another holder.

    saihm-protocol "Client conformance" 9: marked when ``holderIdHex`` is absent, not a
    string, or differs from the caller's holderId without regard to case, and always while
    the caller's holderId is unknown.
    """
    if caller_id is None or not isinstance(holder_id_hex, str):
        return True
    return holder_id_hex.lower() != caller_id.lower()


# Checks before sending (saihm-protocol: each tool's "Client checks").


def check_content(content: str) -> str:
    """saihm_remember: refuse content that is empty or only white space before sending."""
    if not content.strip():
        raise Refused("refused before sending: the content is empty or only white space")
    return content


def check_grantees(grantees: list[str]) -> list[str]:
    """saihm_share: the grantees as lowercase hex without "0x", or :class:`Refused`.

    Refuses an empty list, any grantee that is not even-length hexadecimal after an optional
    "0x" prefix (rather than decode it to a different identity), and a grantee listed twice,
    compared as bytes. Length is the operator's check.
    """
    if not grantees:
        raise Refused("refused before sending: the grantee list is empty")
    normalised: list[str] = []
    seen: set[bytes] = set()
    for position, grantee in enumerate(grantees, start=1):
        digits = grantee[2:] if grantee[:2] in ("0x", "0X") else grantee
        if _HEX.fullmatch(digits) is None:
            raise Refused(
                f"refused before sending: grantee {position} is not even-length hexadecimal"
            )
        as_bytes = bytes.fromhex(digits)
        if as_bytes in seen:
            raise Refused(f"refused before sending: grantee {position} is listed twice")
        seen.add(as_bytes)
        normalised.append(digits.lower())
    return normalised


def check_shard_ids(shard_ids: list[str]) -> list[str]:
    """saihm_share: refuse an empty shard list before sending."""
    if not shard_ids:
        raise Refused("refused before sending: the shard list is empty")
    return shard_ids


def check_expiry_epoch(expiry_epoch: str | None) -> str | None:
    """saihm_share: ``None`` for absent (an empty string means absent), else decimal digits.

    Refuses any other value, including signs, spaces and non-ASCII digits.
    """
    if expiry_epoch is None or expiry_epoch == "":
        return None
    if _DIGITS.fullmatch(expiry_epoch) is None:
        raise Refused("refused before sending: expiryEpoch is not a string of decimal digits")
    return expiry_epoch


def check_proposal(scope: str, param_key: str | None, proposed_value: str | None) -> None:
    """saihm_governance_propose: refuse an emission_param proposal lacking either field.

    Such a proposal would open a vote on no change. An empty paramKey counts as lacking.
    """
    if scope == "emission_param" and (not param_key or proposed_value is None):
        raise Refused(
            "refused before sending: an emission_param proposal needs both paramKey and "
            "proposedValue"
        )
