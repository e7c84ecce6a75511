"""A framework's session or user, given a token through the authority service (issue 25 item 5).

Every adapter takes ``admin=`` (a :class:`saihm.client.Admin` for ``saihm authority serve``)
instead of ``auth_header=``, with the framework's ``session_id`` and either ``holder_id`` (a
SAIHM holder) or ``user_id`` (the application's own name for a person):

- ``user_id`` maps to a holder: the first time, :meth:`~saihm.client.Admin.create_holder`
  makes one (its first session serves this ``session_id``); later, the holder is reused.
- ``session_id`` maps to one SAIHM session of that holder: the first time,
  :meth:`~saihm.client.Admin.open_session` opens it; later,
  :meth:`~saihm.client.Admin.renew_session` gives a fresh token for the same session, so the
  agent keeps that session's memory.

The two maps hold ids only, never a token. By default they live in this process's memory (so
a restart opens new sessions); pass ``users=`` and ``sessions=`` (any ``MutableMapping[str,
str]``, e.g. a table of the application's database) to keep them: ``users`` maps a user_id to
a holder id, ``sessions`` maps ``"<holder_id>/<session_id>"`` to a SAIHM session id. Tokens
stay in the adapter's memory only; nothing is written to disk here.
"""

from __future__ import annotations

import threading
from collections.abc import MutableMapping
from typing import Any

from saihm.client import Admin, ClientError

__all__ = ["IDENTITY_ARGS", "resolve_auth", "session_auth", "take_identity"]

#: The keyword arguments :func:`take_identity` consumes from an adapter's arguments.
IDENTITY_ARGS = ("admin", "session_id", "holder_id", "user_id", "users", "sessions", "ttl")

_lock = threading.Lock()
_users: dict[tuple[str, str], str] = {}
_sessions: dict[tuple[str, str], str] = {}


class _Scoped(MutableMapping[str, str]):
    """The in-memory default map, kept apart per authority service."""

    def __init__(self, store: dict[tuple[str, str], str], where: str) -> None:
        self._store, self._where = store, where

    def __getitem__(self, key: str) -> str:
        return self._store[(self._where, key)]

    def __setitem__(self, key: str, value: str) -> None:
        self._store[(self._where, key)] = value

    def __delitem__(self, key: str) -> None:
        del self._store[(self._where, key)]

    def __iter__(self) -> Any:
        return (k for w, k in list(self._store) if w == self._where)

    def __len__(self) -> int:
        return sum(1 for w, _ in list(self._store) if w == self._where)


def session_auth(
    admin: Admin,
    *,
    session_id: str,
    holder_id: str | None = None,
    user_id: str | None = None,
    users: MutableMapping[str, str] | None = None,
    sessions: MutableMapping[str, str] | None = None,
    ttl: int | None = None,
) -> str:
    """The ``Authorization`` value (``"Bearer <token>"``) for ``session_id`` of ``holder_id``
    or of ``user_id``'s holder, opened or renewed through ``admin`` (see the module).

    Raises :class:`~saihm.client.ClientError` (a wrong credential, an unknown holder, a
    revoked session, ...); its message names no credential and no token.
    """
    if not isinstance(admin, Admin):
        raise ClientError("admin must be a saihm.client.Admin", kind="config")
    if not isinstance(session_id, str) or not session_id:
        raise ClientError("session_id must be a non-empty string", kind="config")
    if (holder_id is None) == (user_id is None):
        raise ClientError("give exactly one of holder_id and user_id", kind="config")
    for name, value in (("holder_id", holder_id), ("user_id", user_id)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ClientError(f"{name} must be a non-empty string", kind="config")
    where = repr(admin)
    with _lock:
        user_map = users if users is not None else _Scoped(_users, where)
        session_map = sessions if sessions is not None else _Scoped(_sessions, where)
        if holder_id is None:
            assert user_id is not None
            holder_id = user_map.get(user_id)
            if holder_id is None:
                issued = admin.create_holder(ttl=ttl)
                assert issued.holder_id is not None and issued.session_id is not None
                user_map[user_id] = issued.holder_id
                session_map[f"{issued.holder_id}/{session_id}"] = issued.session_id
                return "Bearer " + issued.token
        key = f"{holder_id}/{session_id}"
        known = session_map.get(key)
        if known is not None:
            return "Bearer " + admin.renew_session(holder_id, known, ttl=ttl).token
        issued = admin.open_session(holder_id, ttl=ttl)
        assert issued.session_id is not None
        session_map[key] = issued.session_id
        return "Bearer " + issued.token


def take_identity(arguments: dict[str, Any]) -> str | None:
    """Pop :data:`IDENTITY_ARGS` from an adapter's keyword ``arguments``: the
    ``Authorization`` value when ``admin`` was given (:func:`session_auth`), else None (and
    then none of the others may be given)."""
    given = {name: arguments.pop(name) for name in IDENTITY_ARGS if name in arguments}
    admin = given.pop("admin", None)
    if admin is None:
        if given:
            raise ClientError(f"{', '.join(sorted(given))} needs admin=", kind="config")
        return None
    if arguments.get("auth_header") is not None:
        raise ClientError("give either auth_header or admin, not both", kind="config")
    if "session_id" not in given:
        raise ClientError("admin= needs session_id=", kind="config")
    return session_auth(admin, **given)


def resolve_auth(auth_header: str | None, identity: dict[str, Any]) -> str:
    """An adapter constructor's ``Authorization`` value: ``auth_header``, or the one
    :func:`take_identity` gets for ``identity`` (its keyword arguments beyond the usual)."""
    unknown = set(identity) - set(IDENTITY_ARGS)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    from_admin = take_identity({"auth_header": auth_header, **identity})
    auth = from_admin if from_admin is not None else auth_header
    if auth is None:
        raise ClientError("give auth_header, or admin= with session_id=", kind="config")
    return auth
