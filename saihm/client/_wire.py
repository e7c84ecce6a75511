"""Wire values of the binding: protocol numbers, booleans and result identifiers.

saihm-protocol "HTTPS binding" (numbers as JSON numbers or decimal strings; eight boolean
forms) and "Result identifiers" (1 to 256 printable ASCII characters, no space). Pure
functions of the standard library, shared by the client library and the MCP client.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = [
    "has_forbidden_char",
    "is_result_identifier",
    "normalise_excerpt",
    "parse_bool",
    "parse_number",
    "printable",
    "result_identifier",
]

# saihm-protocol "Client conformance" 7: control characters (C0, DEL, C1), the line and
# paragraph separators, and the bidirectional controls.
_FORBIDDEN = re.compile("[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

_IDENTIFIER = re.compile("[\u0021-\u007e]{1,256}")
_DECIMAL = re.compile(r"-?[0-9]{1,40}(?:\.[0-9]{1,40})?")
_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


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


def normalise_excerpt(text: str, limit: int = 80) -> str | None:
    """A short excerpt of a non-JSON body, safe to print, or ``None`` when it must be omitted.

    Runs of white space (line breaks included) become one space, the result is cut to
    ``limit`` characters, and it is then printed only if conformance item 7 allows it.
    """
    collapsed = " ".join(text.split())[:limit]
    return printable(collapsed) if collapsed else None
