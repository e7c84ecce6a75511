"""What a 401 or 403 most likely means, and the command a person runs to fix it.

The operator's 401 body stays the protocol's ``{"error": "unauthenticated"}`` (saihm-protocol
"Authentication"), so the client cannot tell an expired token from a revoked grant; the
advice names the likely causes in order and the commands of docs/integrations.md
("Continuity"). It never quotes the credential or the endpoint. The client cannot tell where
the operator keeps its store, so every command it names says to add ``--store URL`` (or set
``SAIHM_STORE``) when that is PostgreSQL (docs/scaling.md): without it the command refuses the
data directory of a PostgreSQL store.
"""

from __future__ import annotations

__all__ = ["STORE_NOTE", "advice_for", "configuration_fix"]

#: Said after the commands: the client does not know whether the operator's store is LMDB.
STORE_NOTE = (
    "(on an operator that keeps its store in PostgreSQL, add --store URL to each command, "
    "or set SAIHM_STORE)"
)

_UNAUTHENTICATED = (
    "the operator did not accept the credential (value not shown). Most likely it expired "
    "(a session token and a grant last 30 days unless --ttl said otherwise), its session or "
    "grant was revoked, or it was issued for another operator's data directory. A person fixes "
    "it on the operator's machine: for an expired session token, `saihm session renew --data "
    "DIR --holder HOLDER --session SESSION` issues a fresh token for the same session; a "
    "revoked session cannot be renewed, so `saihm session open --data DIR --holder HOLDER` "
    "opens a new one (Admin.open_session through an authority service); `saihm grant --data "
    "DIR --holder HOLDER --sessions all --ttl SECONDS` lets the agent recall across all its "
    f"sessions {STORE_NOTE}. Then set "
    'the Authorization value (SAIHM_AUTH_HEADER) to "Bearer <new token>" and restart the host'
)
_NOT_HOLDER = (
    "the object is not this holder's, or lies outside what this token may see: a session "
    "token sees only its own session. To act on memory of the holder's other sessions a "
    "person runs `saihm grant --data DIR --holder HOLDER --sessions all --ttl SECONDS` "
    f"{STORE_NOTE} and the host uses that token"
)
_CONSUMER = (
    "this credential is not a holder's session token (a Memory Provider consumer grant reads "
    "through /memory/v1 only); use a token from `saihm holder create`, `saihm session open`, "
    "`saihm session renew` or `saihm grant`"
)


def advice_for(http_status: int | None, error_code: str | None) -> str | None:
    """The advice for a failure with this status and operator error code, or ``None``."""
    if http_status == 401:
        return _UNAUTHENTICATED
    if http_status == 403:
        if error_code == "not_holder":
            return _NOT_HOLDER
        if error_code in (None, "not_permitted"):
            return _CONSUMER
    return None


def configuration_fix(http_status: int | None, auth: str, path: str) -> str | None:
    """The client-side mistake behind a 401 or 404 when the client can see it, or ``None``:
    an Authorization value with no scheme (the ``Bearer `` prefix is missing), or an endpoint
    URL with a path (the binding is served at the operator's root). Never quotes either."""
    if http_status == 401 and " " not in auth.strip():
        return (
            'the Authorization value has no "Bearer " prefix: pass the whole value, '
            '"Bearer <token>" (as SAIHM_AUTH_HEADER holds it; value not shown)'
        )
    if http_status == 404 and path not in ("", "/"):
        return (
            f"the endpoint URL has a path ({path}) and the operator answered 404: the binding "
            "is served at the operator's root, so use scheme://host[:port]/ without the path"
        )
    return None
