"""What a token may see and when it ends, said by every token-issuing command.

requirements.txt: "Memory and knowledge start out shared within one session only. Any wider
sharing is a capability that a person grants, not the default." A session token therefore
sees one session; the person's ``saihm grant --sessions all --ttl SECONDS`` is the one path to
recall across sessions, and ``saihm session renew`` issues a fresh token for the same session.
``saihm holder create``, ``saihm session open``, ``saihm session renew`` and ``saihm grant``
print the pinned JSON keys plus ``scope``, ``expiresAt`` and ``expiresAtUtc`` (from
:func:`token_fields`), and one line on stderr (:func:`token_summary`) that names the commands
which widen or renew the token; with the operator's store in PostgreSQL those commands carry
``--store "$SAIHM_STORE"`` (saihm/storage/hint.py), never the URL.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from saihm.errors import MalformedInput
from saihm.events import Capability
from saihm.storage.hint import with_store

__all__ = ["choose_ttl", "describe_lifetime", "token_fields", "token_summary"]


def choose_ttl(ttl: int | None, default: int) -> int:
    """``ttl`` when given (it must be positive), else the operator's default token lifetime."""
    if ttl is None:
        return default
    if ttl <= 0:
        raise MalformedInput("--ttl must be a positive number of seconds")
    return ttl


def _utc(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe_lifetime(seconds: int) -> str:
    """``seconds`` in the largest whole unit that fits: "30 days", "1 hour", "45 seconds"."""
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if (seconds >= size and seconds % size == 0) or seconds >= 2 * size:
            count = round(seconds / size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def token_fields(cap: Capability) -> dict[str, object]:
    """The JSON fields that say what ``cap`` may see and when it expires.

    ``scope.sessions`` is "one" (``scope.sessionId`` names it) or "all" (a person's grant,
    ``scope.grantId``); ``scope.namespaces`` is ``null`` for every namespace.
    """
    scope: dict[str, object] = {"sessions": cap.scope.sessions}
    if cap.scope.sessions == "one" and cap.session_id is not None:
        scope["sessionId"] = cap.session_id.hex()
    if cap.scope.grant_id is not None:
        scope["grantId"] = cap.scope.grant_id.hex()
    scope["namespaces"] = None if cap.scope.namespaces is None else list(cap.scope.namespaces)
    return {"scope": scope, "expiresAt": cap.expires_at, "expiresAtUtc": _utc(cap.expires_at)}


def token_summary(
    cap: Capability, data_dir: str, *, now: int | None = None, store: str | None = None
) -> str:
    """One line for stderr: what ``cap`` sees, when it expires, and the commands that renew or
    widen it (with this holder's and session's ids filled in, never the token). ``store``: the
    operator's PostgreSQL URL, if any; the commands then carry ``--store "$SAIHM_STORE"``
    (never the URL, which may hold a password)."""
    return with_store(_summary(cap, data_dir, now), store)


def _summary(cap: Capability, data_dir: str, now: int | None) -> str:
    left = cap.expires_at - (int(time.time()) if now is None else now)
    holder = cap.holder_id.hex()
    ends = f"it expires {_utc(cap.expires_at)} (in {describe_lifetime(max(left, 0))})"
    namespaces = (
        "every namespace"
        if cap.scope.namespaces is None
        else "namespaces " + ",".join(cap.scope.namespaces)
    )
    if cap.scope.sessions == "all":
        grant = cap.scope.grant_id.hex() if cap.scope.grant_id else "GRANTID"
        return (
            f"saihm: this token sees every session of holder {holder} ({namespaces}), and "
            f"contracts the holder accepted; {ends}, or when the grant is withdrawn with "
            f"`saihm grant revoke --data {data_dir} {grant}`"
        )
    session = cap.session_id.hex() if cap.session_id else "SESSIONID"
    return (
        f"saihm: this token sees only session {session} of holder {holder} ({namespaces}), and "
        f"contracts the holder accepted; {ends}. Renew it: `saihm session renew --data "
        f"{data_dir} --holder {holder} --session {session}`; let an agent recall across "
        f"sessions: `saihm grant --data {data_dir} --holder {holder} --sessions all --ttl "
        "SECONDS`"
    )
