"""Who may read: :class:`Access` and the :class:`Authenticator` that alone issues one.

requirements.txt (Security considerations): "What proves that a caller may read is issued
elsewhere, so the caller cannot manufacture it". An :class:`Access` is made only from an
authority-signed capability token (saihm-protocol "Capabilities") or, for the person acting on
their own data directory in process, by :meth:`Authenticator.person_access`; each is sealed
with an HMAC under a key that exists only in this process's memory, which the checked read path
(saihm/store/read/reader.py) verifies before reading anything.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass, field

from saihm.errors import ErrorCode, MalformedInput, SaihmError, Unauthenticated
from saihm.events import Capability
from saihm.events.signing import verify_capability
from saihm.projections import StaleProjections
from saihm.projections import apply as P
from saihm.projections.keys import dumps
from saihm.storage import ReadTxn
from saihm.storage.base import prefetch
from saihm.store.environment import Environment

#: Verified capabilities kept by token digest; emptied when it grows past this.
TOKEN_CACHE_MAX = 4096


@dataclass(frozen=True)
class Access:
    """A verified capability. Only :class:`Authenticator` issues a usable one.

    The issuing store seals each Access with an HMAC over its fields under a key that exists
    only in that store's memory; the read path refuses any Access whose seal does not match,
    so one built by hand or widened with ``dataclasses.replace`` (which drops the seal) reads
    nothing.
    """

    holder_id: bytes
    session_id: bytes | None
    all_sessions: bool
    namespaces: frozenset[str] | None
    grant_id: bytes | None
    consumer: str | None
    mode: str | None
    expires_at: int
    token_id: bytes
    #: The person acting on their own memory (a passkey sign-in at ``/me/``, or the person's
    #: in-process commands), never an agent: their reads (recall, status) log no public
    #: RECALL or STATUS receipt (docs/security.md "What the public log reveals"). No token
    #: gives it; only :meth:`Authenticator.person_access` does.
    person: bool = False
    _seal: bytes = field(init=False, repr=False, compare=False, default=b"")

    def own_session(self) -> bytes:
        """The one session this access is scoped to. Raises :class:`MalformedInput`
        (``no_session``) for a holder-wide access (sessions "all"), whose ``session_id`` is
        None."""
        if self.session_id is None:
            raise MalformedInput(
                "this token names no session to write into", code=ErrorCode.NO_SESSION
            )
        return self.session_id


class Revocations:
    """The session revocations this process has seen, checked against their sealed count.

    ``p_session_revocations`` is a projection: a record deleted at rest, or the namespace lost
    or renumbered (PostgreSQL's ``saihm_namespace``), would read as "not revoked". So the
    projection also keeps the number of records it holds, sealed with the applied index in
    ``p_meta`` (saihm/projections/meta.py). Before deciding, :meth:`subjects` reads that count
    and the tree size in the caller's snapshot: a count that is missing, belongs to another
    tree size, or is larger than the authentic records found fails closed
    (:class:`StaleProjections`, naming the repair). Subjects once seen are kept in memory for
    the life of the process, so a record deleted under a running process stays honoured. The
    hot path reads two keys (the count and the last leaf); the records are scanned only when
    the count grew.
    """

    def __init__(self, env: Environment) -> None:
        self.env = env
        self._subjects: frozenset[bytes] = frozenset()
        self._count = 0
        self._lock = threading.Lock()

    def subjects(self, txn: ReadTxn) -> frozenset[bytes]:
        """Every revocation subject known as of ``txn``; raises :class:`StaleProjections`
        when the revocations do not match their sealed count."""
        size = self.env.tree.size(txn)
        if size == 0:
            return self._subjects
        count = self.env.projections.meta.revocations(txn)
        if count is None or count.applied != size:
            raise _damaged("their sealed count is missing or not of this log")
        if count.count > self._count:
            with self._lock:
                found = self.env.projections.grants.subjects(txn)
                if len(found) != count.count:
                    raise _damaged(f"{len(found)} of {count.count} records are intact")
                self._subjects = self._subjects | found
                self._count = max(self._count, count.count)
        return self._subjects

    def revoked(self, txn: ReadTxn, holder_id: bytes, *ids: bytes | None) -> bool:
        """Whether a token of ``holder_id`` carrying any of ``ids`` (its tokenId, sessionId)
        is revoked (docs/formats.md "Session revocation")."""
        subjects = self.subjects(txn)
        return any(i is not None and P.revocation_subject(holder_id, i) in subjects for i in ids)


def _damaged(why: str) -> StaleProjections:
    return StaleProjections(
        f"the session revocations cannot be trusted ({why}); "
        "run `saihm rebuild --data DIR --replace`"
    )


class Authenticator:
    """Issues and recognises the :class:`Access` values of one store."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self._key = secrets.token_bytes(32)
        self._token_cache: dict[bytes, Capability] = {}
        self.revocations = Revocations(env)
        #: The namespace whose end an authentication reads: the log's leaves (the tree size).
        self._ends = (env.tree.leaves_namespace,)

    def authenticate(self, token: str | None) -> Access:
        """Turn a bearer token into an :class:`Access`, or raise :class:`Unauthenticated`.

        The token must carry the authority's signature, be unexpired, name a holder whose KEY
        receipt is in the log, carry no revoked tokenId or sessionId, and, if it is a grant,
        name a GRANT receipt with no UNGRANT (saihm-protocol "Capabilities"). Raises
        :class:`StaleProjections` (fail closed) when the revocations cannot be trusted
        (:class:`Revocations`).
        """
        if not token:
            raise Unauthenticated("no capability")
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        now = int(self.env.clock())
        cap = self._token_cache.get(digest)
        if cap is None:
            try:
                cap = Capability.from_token(token)
                verify_capability(cap, self.env.authority_public_key, now)
            except SaihmError as err:
                raise Unauthenticated("invalid capability") from err
            if len(self._token_cache) > TOKEN_CACHE_MAX:
                self._token_cache.clear()
            self._token_cache[digest] = cap
        if cap.expires_at <= now:
            raise Unauthenticated("expired capability")
        scope = cap.scope
        records = self.env.projections
        with self.env.storage.read() as txn:
            # One round trip for every key read below, on a store whose reads are round trips.
            prefetch(txn, records.access_keys(cap.holder_id, scope.grant_id), self._ends)
            if not records.holders.known(txn, cap.holder_id):
                raise Unauthenticated("unknown holder")
            if self.revocations.revoked(txn, cap.holder_id, cap.token_id, cap.session_id):
                raise Unauthenticated("session revoked")
            if scope.grant_id is not None:
                grant = records.grants.get(txn, scope.grant_id)
                if grant is None or grant.revoked or grant.holder != cap.holder_id:
                    raise Unauthenticated("grant revoked or unknown")
                if grant.expires_at and grant.expires_at <= now:
                    raise Unauthenticated("grant expired")
        namespaces = None if scope.namespaces is None else frozenset(scope.namespaces)
        return self._sealed(
            Access(
                holder_id=cap.holder_id,
                # None for a holder-wide capability (sessions "all"): Access.own_session.
                session_id=cap.session_id,
                all_sessions=scope.sessions == "all",
                namespaces=namespaces,
                grant_id=scope.grant_id,
                consumer=scope.consumer,
                mode=scope.mode,
                expires_at=cap.expires_at,
                token_id=cap.token_id,
            )
        )

    def person_access(
        self, holder_id: bytes, session_id: bytes, ttl: int = 300, *, all_sessions: bool = False
    ) -> Access:
        """The session-scoped :class:`Access` of the person acting on their own data directory
        in process (``saihm memory store|forget|accept``), with no token: the same scope a
        session token from the authority gives, for ``ttl`` seconds. With ``all_sessions``
        (the person signed in with a passkey at ``/me/``) it reads every session of the
        holder and writes into ``session_id``.

        Raises :class:`Unauthenticated` for a holder with no KEY receipt or a revoked session,
        as :meth:`authenticate` would for that session's token, and :class:`StaleProjections`
        when the revocations cannot be trusted (:class:`Revocations`).
        """
        projections = self.env.projections
        with self.env.storage.read() as txn:
            if projections.get(txn, P.HOLDERS, holder_id) is None:
                raise Unauthenticated("unknown holder")
            if self.revocations.revoked(txn, holder_id, session_id):
                raise Unauthenticated("session revoked")
        return self._sealed(
            Access(
                holder_id=holder_id,
                session_id=session_id,
                all_sessions=all_sessions,
                namespaces=None,
                grant_id=None,
                consumer=None,
                mode=None,
                expires_at=int(self.env.clock()) + ttl,
                token_id=secrets.token_bytes(16),
                person=True,
            )
        )

    def issued(self, access: Access) -> bool:
        """Whether ``access`` was issued by this authenticator, unaltered."""
        return hmac.compare_digest(access._seal, self._seal(access))

    def require(self, access: Access) -> None:
        """Raise :class:`Unauthenticated` unless :meth:`issued` holds for ``access``."""
        if not self.issued(access):
            raise Unauthenticated("access was not issued by this store")

    @property
    def cached_tokens(self) -> int:
        """How many verified capabilities are cached (for ``/ops``)."""
        return len(self._token_cache)

    def _sealed(self, access: Access) -> Access:
        object.__setattr__(access, "_seal", self._seal(access))
        return access

    def _seal(self, access: Access) -> bytes:
        fields = (
            access.holder_id,
            access.session_id,
            access.all_sessions,
            None if access.namespaces is None else sorted(access.namespaces),
            access.grant_id,
            access.consumer,
            access.mode,
            access.expires_at,
            access.token_id,
            access.person,
        )
        return hmac.digest(self._key, dumps(list(fields)), "sha256")
