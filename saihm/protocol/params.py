"""Strict parsing of protocol parameters and the JSON forms of ids and numbers.

saihm-protocol "Request and response": params is a JSON object; unknown members are refused so
that a caller cannot smuggle in a filter; numbers that can exceed 2^53 - 1 go out as decimal
strings; ids are 64 lowercase hexadecimal characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from typing import Any, cast

from saihm.errors import MalformedInput

__all__ = ["boolean", "check_params", "dec", "epoch", "hx", "id32", "string_list", "text"]

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_DIGITS = re.compile(r"[0-9]{1,20}")


def check_params(
    params: object, allowed: set[str], required: Set[str] = frozenset()
) -> dict[str, Any]:
    """``params`` as a dict with only ``allowed`` members and every ``required`` one."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise MalformedInput("params must be a JSON object")
    unknown = set(params) - allowed
    if unknown:
        raise MalformedInput("unknown parameter", code="unknown_param")
    missing = required - set(params)
    if missing:
        raise MalformedInput("missing parameter", code="missing_param")
    return params


def _unicode(value: str) -> bool:
    """Whether ``value`` is valid Unicode text (no lone surrogate, which JSON can carry as
    ``\\ud800`` but UTF-8 and CBOR cannot)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text(
    params: Mapping[str, Any],
    name: str,
    *,
    default: str | None = None,
    nullable: bool = False,
    code: str = "bad_request",
) -> Any:
    """A string member (or ``default`` when absent; None when null and ``nullable``).

    A non-string or a string with a lone surrogate is :class:`MalformedInput` with ``code``.
    """
    value = params.get(name, default)
    if value is None and (nullable or name not in params):
        return None
    if not isinstance(value, str):
        raise MalformedInput(f"{name} must be a string", code=code)
    if not _unicode(value):
        raise MalformedInput(f"{name} is not valid Unicode text", code=code)
    return value


def id32(value: object, *, code: str = "bad_request", what: str = "id") -> bytes:
    """A 32-byte id from 64 hexadecimal characters (case-insensitive on input)."""
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise MalformedInput(f"{what} must be 64 hexadecimal characters", code=code)
    return bytes.fromhex(value)


def boolean(value: object, name: str) -> bool:
    """A JSON boolean (the binding sends true/false)."""
    if isinstance(value, bool):
        return value
    raise MalformedInput(f"{name} must be a boolean")


def epoch(value: object, name: str) -> int | None:
    """An optional decimal string (or integer) of UNIX seconds; "" and null mean absent."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise MalformedInput(f"{name} must be decimal digits", code="invalid_expiry")
    if isinstance(value, int) and 0 <= value < 1 << 64:
        return value
    if isinstance(value, str) and _DIGITS.fullmatch(value) and int(value) < 1 << 64:
        return int(value)
    raise MalformedInput(f"{name} must be decimal digits", code="invalid_expiry")


def string_list(params: Mapping[str, Any], name: str, *, code: str = "bad_request") -> list[str]:
    """A JSON array of valid Unicode strings; anything else is :class:`MalformedInput`
    with ``code``."""
    value = params.get(name)
    if not isinstance(value, list) or not all(isinstance(v, str) and _unicode(v) for v in value):
        raise MalformedInput(f"{name} must be an array of strings", code=code)
    return cast("list[str]", value)


def hx(value: bytes) -> str:
    """Lowercase hexadecimal."""
    return value.hex()


def dec(value: int) -> str:
    """A number that can exceed 2^53 - 1, as a decimal string."""
    return str(value)
