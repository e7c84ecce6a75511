"""Checks before sending (saihm-protocol: each tool's "Client checks").

Each function returns the value to send or raises a ``refused`` :class:`ClientError` whose
message never quotes the refused value. Shared by the client library and the MCP client.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from saihm.client.errors import ClientError

__all__ = [
    "check_cell_id",
    "check_content",
    "check_expiry_epoch",
    "check_grantees",
    "check_metadata",
    "check_proposal",
    "check_shard_ids",
]

_DIGITS = re.compile(r"[0-9]{1,40}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
#: The operator's bound on ``metadata`` (saihm.events.models.METADATA_MAX_BYTES).
METADATA_MAX_BYTES = 1024 * 1024


def _refused(message: str) -> ClientError:
    return ClientError(f"refused before sending: {message}", kind="refused")


def check_content(content: str) -> str:
    """saihm_remember: refuse content that is empty or only white space before sending."""
    if not isinstance(content, str) or not content.strip():
        raise _refused("the content is empty or only white space")
    return content


def check_cell_id(cell_id: str, what: str) -> str:
    """A cellId to send (``supersedes``): 64 hexadecimal characters, sent in lowercase."""
    if not isinstance(cell_id, str) or _HEX64.fullmatch(cell_id) is None:
        raise _refused(f"{what} is not a cellId (64 hexadecimal characters)")
    return cell_id.lower()


def check_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` to send: a mapping JSON can hold exactly (string keys; no NaN, infinity
    or lone surrogate) whose compact JSON is at most 1 MiB, as a plain dict."""
    if not isinstance(metadata, Mapping):
        raise _refused("metadata is not a mapping")
    value = dict(metadata)
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as err:
        raise _refused("metadata is not a JSON object with string keys") from err
    if size > METADATA_MAX_BYTES:
        raise _refused(f"metadata is over {METADATA_MAX_BYTES} bytes as JSON")
    return value


def check_grantees(grantees: list[str]) -> list[str]:
    """saihm_share: the grantees as lowercase hex without "0x".

    Refuses an empty list, any grantee that is not even-length hexadecimal after an optional
    "0x" prefix (rather than decode it to a different identity), and a grantee listed twice,
    compared as bytes. Length is the operator's check.
    """
    if not grantees:
        raise _refused("the grantee list is empty")
    normalised: list[str] = []
    seen: set[bytes] = set()
    for position, grantee in enumerate(grantees, start=1):
        text = grantee if isinstance(grantee, str) else ""
        digits = text[2:] if text[:2] in ("0x", "0X") else text
        if _HEX.fullmatch(digits) is None:
            raise _refused(f"grantee {position} is not even-length hexadecimal")
        as_bytes = bytes.fromhex(digits)
        if as_bytes in seen:
            raise _refused(f"grantee {position} is listed twice")
        seen.add(as_bytes)
        normalised.append(digits.lower())
    return normalised


def check_shard_ids(shard_ids: list[str]) -> list[str]:
    """saihm_share: refuse an empty shard list before sending."""
    if not shard_ids:
        raise _refused("the shard list is empty")
    return shard_ids


def check_expiry_epoch(expiry_epoch: str | None) -> str | None:
    """saihm_share: ``None`` for absent (an empty string means absent), else decimal digits.

    Refuses any other value, including signs, spaces and non-ASCII digits.
    """
    if expiry_epoch is None or expiry_epoch == "":
        return None
    if not isinstance(expiry_epoch, str) or _DIGITS.fullmatch(expiry_epoch) is None:
        raise _refused("expiryEpoch is not a string of decimal digits")
    return expiry_epoch


def check_proposal(scope: str, param_key: str | None, proposed_value: str | None) -> None:
    """saihm_governance_propose: refuse an emission_param proposal lacking either field.

    Such a proposal would open a vote on no change. An empty paramKey counts as lacking.
    """
    if scope == "emission_param" and (not param_key or proposed_value is None):
        raise _refused("an emission_param proposal needs both paramKey and proposedValue")
