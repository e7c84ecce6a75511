"""The person's credential: a one-time link, passkeys (WebAuthn) and the person token.

The authority decides who may enrol: ``POST /v1/person-links`` (``saihm authority serve``) or
``saihm person-link`` (in process, beside a development ``saihm serve``) writes a one-time link
for a known holder. The operator's page ``/me/`` then runs the two WebAuthn ceremonies against
the same store, with py_webauthn parsing and verifying every authenticator byte:

- *registration* (``navigator.credentials.create``): the link's one-time code, presented once,
  opens a registration challenge; the verified attestation stores a passkey (credential id,
  COSE public key, signature counter, the origin and relying party the link named) for the
  link's holder, and the link is spent in the same write;
- *authentication* (``navigator.credentials.get``): a discoverable-credential challenge; the
  verified assertion (user verification required, origin and RP ID checked, the counter must
  grow) yields a person token.

Every record is kept in the store's ``person`` namespace (LMDB or PostgreSQL), which the
operator's workers and the authority service open alike, so a link minted by ``saihm
authority serve`` is redeemed at ``saihm serve`` with no call between them. Secrets are kept
only as SHA-256 digests: the link's code and the person token.

The person token (``saihm-person-v1.`` then 43 base64url characters) is of its own kind: it
is not a capability and no capability passes where it is asked for (:func:`check_person`),
it lives at most :data:`PERSON_TOKEN_TTL` seconds, and it dies with the passkey that signed it
in. Challenges live :data:`CHALLENGE_TTL` seconds, sealed inside the ceremony id (asking for
options stores nothing), and are spent in the write of the ceremony's effect, so each works
once; links are single use and live at most :data:`LINK_TTL_MAX` seconds.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from saihm.errors import ErrorCode, MalformedInput, NotFound, NotPermitted, Unauthenticated
from saihm.projections.keys import dumps, loads
from saihm.store.environment import PERSON

if TYPE_CHECKING:
    from saihm.storage import Namespace, ReadTxn, WriteTxn
    from saihm.store import Store

__all__ = [
    "CHALLENGE_TTL",
    "LINK_TTL_MAX",
    "PERSON",
    "PERSON_TOKEN_PREFIX",
    "PERSON_TOKEN_TTL",
    "Passkey",
    "PersonSession",
    "PersonState",
    "note_grant_read",
    "operator_origin",
]

#: A link lives at most a day (issue "person, a first-class user").
LINK_TTL_MAX = 86_400
#: A sign-in lasts at most 12 hours.
PERSON_TOKEN_TTL = 12 * 3600
#: A ceremony's challenge lives five minutes.
CHALLENGE_TTL = 300
PERSON_TOKEN_PREFIX = "saihm-person-v1."
LABEL_MAX = 80

_LINK, _CHALLENGE, _KEY, _TOKEN, _NAME, _SUPERSEDED = b"L", b"C", b"K", b"T", b"N", b"S"
_USE = b"U"
#: A worker writes a grant's reads at most this often (the rest wait in its memory).
USE_FLUSH_SECONDS = 5
#: How many of a grant's latest reads are kept.
USE_READS_KEPT = 10
#: How far back :meth:`PersonState.replaced` follows a chain of edits.
HISTORY_MAX = 100
_LOOPBACK_NAMES = frozenset({"localhost"})
_log = logging.getLogger("saihm.person")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def utc(epoch: int) -> str:
    """ISO 8601 in UTC, as every other answer of the authority writes it."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def operator_origin(url: str) -> tuple[str, str]:
    """The WebAuthn origin and RP ID of an operator URL (``https://host[:port]/``).

    Refuses (:class:`MalformedInput`) an IP address (a passkey binds to a host name: use
    ``localhost`` for a local operator) and plain ``http`` off the loopback name.
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host or parts.username or parts.password:
        raise MalformedInput("the operator URL must be http(s)://HOST[:PORT]/")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        raise MalformedInput(
            "a passkey is bound to a host name, not an IP address: use localhost for a local "
            "operator"
        )
    if parts.scheme == "http" and host not in _LOOPBACK_NAMES:
        raise MalformedInput("plain http is for localhost only: the operator URL needs https")
    try:
        port = parts.port
    except ValueError as err:
        raise MalformedInput("the operator URL has a bad port") from err
    default = {"http": 80, "https": 443}[parts.scheme]
    origin = f"{parts.scheme}://{host}" + ("" if port in (None, default) else f":{port}")
    return origin, host


@dataclass(frozen=True)
class Passkey:
    """One of a person's passkeys, as the page lists it (no key material)."""

    passkey_id: str  # hex SHA-256 of the credential id: how the page names it
    created_at: int
    last_used_at: int | None
    sign_count: int

    def to_json(self) -> dict[str, object]:
        """The page's view."""
        return {
            "passkeyId": self.passkey_id,
            "createdAt": self.created_at,
            "lastUsedAt": self.last_used_at,
        }


@dataclass(frozen=True)
class PersonSession:
    """A checked person token: whose, through which passkey, from which origin, until when."""

    holder_id: bytes
    passkey_id: bytes
    origin: str
    expires_at: int


_T = TypeVar("_T")


class _Writes:
    """One person write as its decision sees it: reads go to the store's write transaction
    (this write's own changes first, for a point read; a scan sees the transaction as it
    was), and the records to put (``set``) or remove (``unset``) are collected for the store
    to write (``Change.person``, saihm/store/commit.py)."""

    def __init__(self, txn: WriteTxn, db: Namespace) -> None:
        self._txn, self._db = txn, db
        self.changes: dict[bytes, bytes | None] = {}

    def get(self, key: bytes, db: Namespace) -> bytes | None:
        if key in self.changes:
            return self.changes[key]
        return self._txn.get(key, db=db)

    def scan(self, db: Namespace, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self._txn.scan(db, prefix=prefix)

    def set(self, key: bytes, value: bytes) -> None:
        self.changes[key] = value

    def unset(self, key: bytes) -> None:
        self.changes[key] = None


class PersonState:
    """The person records of one store (links, ceremonies, passkeys, tokens, grant labels)."""

    def __init__(self, store: Store, *, clock: Any = None) -> None:
        self.store = store
        self.db: Namespace = store.storage.namespace(PERSON)
        self._clock = clock or store.clock
        self._reads: dict[bytes, list[list[int]]] = {}  # grant key -> [[when, cells]] unwritten
        self._flushed: dict[bytes, int] = {}
        self._reads_lock = threading.Lock()

    def now(self) -> int:
        """Seconds since the epoch (the store's clock unless one was given)."""
        return int(self._clock())

    # Every record is sealed with the store's record key (HMAC, saihm/projections/seal.py),
    # which lives outside the data directory: a record written by raw access to the store (a
    # passkey, a link, a sign-in) has no valid tag and reads as absent.

    def _put(self, txn: _Writes, key: bytes, record: dict[str, Any]) -> None:
        txn.set(key, self.store.record_seal.seal(PERSON, key, dumps(record)))

    def _write(self, decide: Callable[[_Writes], _T]) -> _T:
        """Run ``decide`` inside the store's write transaction and have the store make the
        writes it chose (the store is the only writer: its group commit checks the free-disk
        floor, grows the map and retries). ``decide`` reads through the transaction and
        raises a ``SaihmError`` to refuse, which writes nothing. Raises ``Unavailable`` when
        the store cannot write."""
        from saihm.store.commit import Change

        change = Change(receipts=[])
        decided: list[_T] = []

        def guard(txn: WriteTxn) -> object:
            writes = _Writes(txn, self.db)
            # Assigned, not appended: a batch retried after the map grew runs the guard again.
            decided[:] = [decide(writes)]
            change.person = list(writes.changes.items())
            return None

        change.guard = guard
        self.store.commits.commit(change)
        return decided[0]

    def _get(self, txn: ReadTxn | _Writes, key: bytes) -> dict[str, Any] | None:
        value = self.store.record_seal.open(PERSON, key, txn.get(key, db=self.db))
        return None if value is None else loads(value)  # type: ignore[return-value]

    def _scan(self, txn: ReadTxn | _Writes, prefix: bytes) -> list[tuple[bytes, dict[str, Any]]]:
        out = []
        for key, stored in txn.scan(self.db, prefix=prefix):
            value = self.store.record_seal.open(PERSON, bytes(key), stored)
            if value is not None:
                out.append((bytes(key), loads(value)))
        return out  # type: ignore[return-value]

    # -- links --------------------------------------------------------------------------

    def mint_link(
        self, holder_id: bytes, operator_url: str, ttl: int = LINK_TTL_MAX
    ) -> dict[str, Any]:
        """A one-time link for a known holder: ``{"url", "expiresAt", "expiresAtUtc"}``.

        The code rides in the URL's fragment (``#enrol=``), which a browser sends to no
        server and puts in no Referer. Raises :class:`NotFound` (``holder_not_found``) for an
        unknown holder and :class:`MalformedInput` for a lifetime over a day."""
        from saihm.authority.actions import check_holder

        if not 0 < ttl <= LINK_TTL_MAX:
            raise MalformedInput(f"a person link lives 1 to {LINK_TTL_MAX} seconds")
        origin, rp_id = operator_origin(operator_url)
        check_holder(self.store, holder_id)
        link_id, code = secrets.token_bytes(16), secrets.token_bytes(32)
        expires = self.now() + ttl
        record = {"h": holder_id, "c": _sha(code), "x": expires, "o": origin, "r": rp_id}
        self._write(lambda txn: self._put(txn, _LINK + link_id, record))
        url = f"{origin}/me/#enrol={link_id.hex()}.{_b64(code)}"
        return {"url": url, "expiresAt": expires, "expiresAtUtc": utc(expires)}

    def _link(self, txn: ReadTxn, link_text: object) -> tuple[bytes, dict[str, Any]]:
        """The live link a ``LINKID.CODE`` text names; :class:`Unauthenticated` otherwise
        (unknown, wrong code, used or expired: one answer for all)."""
        refused = Unauthenticated(
            "this link is not valid: ask for a new one", code=ErrorCode.LINK_REFUSED
        )
        if not isinstance(link_text, str) or len(link_text) > 200 or "." not in link_text:
            raise refused
        id_text, _, code_text = link_text.partition(".")
        try:
            link_id, code = bytes.fromhex(id_text), _unb64(code_text)
        except ValueError as err:
            raise refused from err
        record = self._get(txn, _LINK + link_id) if len(link_id) == 16 else None
        if record is None:
            raise refused
        if not hmac.compare_digest(record["c"], _sha(code)):
            raise refused
        if record.get("u") or record["x"] <= self.now():
            raise refused
        return link_id, record

    # -- ceremonies ---------------------------------------------------------------------

    # A ceremony is stateless until it succeeds: its id carries the challenge record itself,
    # sealed with the store's record key, so asking for options writes nothing (the options
    # calls need no credential). A verified ceremony is then spent in the same write as its
    # effect (a marker kept until the challenge expires), so each challenge works once.

    def _open_ceremony(self, record: dict[str, Any]) -> str:
        """A ceremony id: ``payload.tag`` in base64url (the record, its expiry and an id)."""
        payload = dumps({**record, "x": self.now() + CHALLENGE_TTL, "id": secrets.token_bytes(16)})
        tag = self.store.record_seal.tag(PERSON, b"ceremony", payload)
        return f"{_b64(payload)}.{_b64(tag)}"

    def _take_ceremony(self, ceremony: object, kind: str) -> dict[str, Any]:
        """The live challenge record a ceremony id carries (not yet spent: see
        :meth:`_spend`); :class:`Unauthenticated` (``ceremony_refused``) otherwise."""
        refused = Unauthenticated(
            "this sign-in expired or was used: start again", code=ErrorCode.CEREMONY_REFUSED
        )
        if not isinstance(ceremony, str) or len(ceremony) > 2048 or "." not in ceremony:
            raise refused
        payload_text, _, tag_text = ceremony.partition(".")
        try:
            payload, tag = _unb64(payload_text), _unb64(tag_text)
        except ValueError as err:
            raise refused from err
        expected = self.store.record_seal.tag(PERSON, b"ceremony", payload)
        if not hmac.compare_digest(tag, expected):
            raise refused
        record: dict[str, Any] = loads(payload)  # type: ignore[assignment]
        if record["k"] != kind or record["x"] <= self.now():
            raise refused
        return record

    def _spend(self, txn: _Writes, record: dict[str, Any]) -> None:
        """Mark a verified ceremony used, in the write of its effect; refuse a second use."""
        key = _CHALLENGE + record["id"]
        if txn.get(key, db=self.db) is not None:
            raise Unauthenticated(
                "this sign-in expired or was used: start again", code=ErrorCode.CEREMONY_REFUSED
            )
        now = self.now()
        for old in [bytes(k) for k, _ in txn.scan(self.db, prefix=_CHALLENGE)]:
            found = self._get(txn, old)
            if found is None or found["x"] <= now:
                txn.unset(old)
        self._put(txn, key, {"x": record["x"]})

    def registration_options(self, link_text: object, origin: str | None) -> dict[str, Any]:
        """``navigator.credentials.create`` options for a live link, and the ceremony id."""
        from webauthn import generate_registration_options, options_to_json
        from webauthn.helpers.structs import (
            AuthenticatorSelectionCriteria,
            PublicKeyCredentialDescriptor,
            ResidentKeyRequirement,
            UserVerificationRequirement,
        )

        with self.store.read_txn() as txn:
            link_id, link = self._link(txn, link_text)
            existing = [
                PublicKeyCredentialDescriptor(id=rec["id"])
                for rec in self._passkeys(txn, link["h"])
            ]
        _same_origin(origin, link["o"])
        challenge = secrets.token_bytes(32)
        options = generate_registration_options(
            rp_id=link["r"],
            rp_name="saihm: my memory",
            user_id=link["h"][:32],
            user_name=f"holder {link['h'].hex()[:12]}",
            user_display_name="My memory",
            challenge=challenge,
            timeout=CHALLENGE_TTL * 1000,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.REQUIRED,
                user_verification=UserVerificationRequirement.REQUIRED,
            ),
            exclude_credentials=existing,
        )
        ceremony = self._open_ceremony(
            {"k": "reg", "ch": challenge, "l": link_id, "o": link["o"], "r": link["r"]}
        )
        return {"ceremonyId": ceremony, "publicKey": json.loads(options_to_json(options))}

    def register(self, ceremony: object, credential: object) -> dict[str, Any]:
        """Verify an attestation, store the passkey, spend the link; a person token."""
        from webauthn import verify_registration_response

        record = self._take_ceremony(ceremony, "reg")
        try:
            verified = verify_registration_response(
                credential=_credential(credential),
                expected_challenge=record["ch"],
                expected_rp_id=record["r"],
                expected_origin=record["o"],
                require_user_verification=True,
            )
        except Exception as err:  # the library's refusals: each is the client's fault
            raise Unauthenticated(
                "the passkey was not accepted", code=ErrorCode.PASSKEY_REFUSED
            ) from err
        key = _KEY + _sha(verified.credential_id)
        now = self.now()

        def enrol(txn: _Writes) -> dict[str, Any]:
            link = self._get(txn, _LINK + record["l"])
            if link is None or link.get("u") or link["x"] <= now:
                raise Unauthenticated(
                    "this link is not valid: ask for a new one", code=ErrorCode.LINK_REFUSED
                )
            self._spend(txn, record)
            if txn.get(key, db=self.db) is not None:  # enrolled already (sealed or not)
                raise Unauthenticated(
                    "this passkey is enrolled already", code=ErrorCode.PASSKEY_REFUSED
                )
            passkey = {
                "h": link["h"],
                "id": verified.credential_id,
                "pk": verified.credential_public_key,
                "n": verified.sign_count,
                "o": record["o"],
                "r": record["r"],
                "t": now,
            }
            self._put(txn, key, passkey)
            self._put(txn, _LINK + record["l"], {**link, "u": True})
            return link

        link = self._write(enrol)
        return self._issue(link["h"], key[1:], record["o"])

    def authentication_options(self, origin: str | None) -> dict[str, Any]:
        """``navigator.credentials.get`` options (a discoverable credential of this origin)."""
        from webauthn import generate_authentication_options, options_to_json
        from webauthn.helpers.structs import UserVerificationRequirement

        if origin is None:
            raise MalformedInput("the request has no Origin", code=ErrorCode.BAD_ORIGIN)
        expected, rp_id = operator_origin(origin)
        if expected != origin:
            raise MalformedInput("the Origin is not an operator's", code=ErrorCode.BAD_ORIGIN)
        challenge = secrets.token_bytes(32)
        options = generate_authentication_options(
            rp_id=rp_id,
            challenge=challenge,
            timeout=CHALLENGE_TTL * 1000,
            user_verification=UserVerificationRequirement.REQUIRED,
        )
        ceremony = self._open_ceremony({"k": "auth", "ch": challenge, "o": origin, "r": rp_id})
        return {"ceremonyId": ceremony, "publicKey": json.loads(options_to_json(options))}

    def authenticate(self, ceremony: object, credential: object) -> dict[str, Any]:
        """Verify an assertion against the stored passkey; a person token."""
        from webauthn import verify_authentication_response
        from webauthn.helpers import parse_authentication_credential_json

        record = self._take_ceremony(ceremony, "auth")
        refused = Unauthenticated("the passkey was not accepted", code=ErrorCode.PASSKEY_REFUSED)
        try:
            parsed = parse_authentication_credential_json(_credential(credential))
        except Exception as err:
            raise refused from err
        key = _KEY + _sha(parsed.raw_id)
        with self.store.read_txn() as txn:
            passkey = self._get(txn, key)
        if passkey is None:
            raise refused
        if passkey["o"] != record["o"] or passkey["r"] != record["r"]:
            raise refused
        try:
            verified = verify_authentication_response(
                credential=parsed,
                expected_challenge=record["ch"],
                expected_rp_id=passkey["r"],
                expected_origin=passkey["o"],
                credential_public_key=passkey["pk"],
                credential_current_sign_count=passkey["n"],
                require_user_verification=True,
            )
        except Exception as err:
            raise refused from err
        now = self.now()

        def sign_in(txn: _Writes) -> dict[str, Any]:
            self._spend(txn, record)
            current = self._get(txn, key)
            if current is None:
                raise refused
            count = verified.new_sign_count
            if (count or current["n"]) and count <= current["n"]:
                raise refused  # a clone, or an assertion raced by another
            self._put(txn, key, {**current, "n": count, "u": now})
            return current

        current = self._write(sign_in)
        return self._issue(current["h"], key[1:], current["o"])

    # -- person tokens --------------------------------------------------------------------

    def _issue(self, holder_id: bytes, passkey_id: bytes, origin: str) -> dict[str, Any]:

        token = PERSON_TOKEN_PREFIX + _b64(secrets.token_bytes(32))
        expires = self.now() + PERSON_TOKEN_TTL
        record = {"h": holder_id, "k": passkey_id, "o": origin, "x": expires}

        def issue(txn: _Writes) -> None:
            for key in [bytes(k) for k, _ in txn.scan(self.db, prefix=_TOKEN)]:
                found = self._get(txn, key)  # sweep the expired ones
                if found is None or found["x"] <= self.now():
                    txn.unset(key)
            self._put(txn, _TOKEN + _sha(token.encode("ascii")), record)

        self._write(issue)
        return {
            "personToken": token,
            "holderId": holder_id.hex(),
            "expiresAt": expires,
            "expiresAtUtc": utc(expires),
        }

    def session(self, token: str) -> PersonSession:
        """The live session a person token names; :class:`Unauthenticated` otherwise (also
        once its passkey was removed)."""
        refused = Unauthenticated("the sign-in is not valid: sign in again")
        if not token.startswith(PERSON_TOKEN_PREFIX) or len(token) > 100:
            raise refused
        with self.store.read_txn() as txn:
            record = self._get(txn, _TOKEN + _sha(token.encode("ascii", "replace")))
            if record is None:
                raise refused
            passkey = self._get(txn, _KEY + record["k"])
        if record["x"] <= self.now() or passkey is None:
            raise refused
        if passkey["h"] != record["h"]:
            raise refused
        return PersonSession(record["h"], record["k"], record["o"], record["x"])

    def sign_out(self, token: str) -> None:
        """Forget a person token (no error when it is unknown)."""
        self._write(lambda txn: txn.unset(_TOKEN + _sha(token.encode("ascii", "replace"))))

    # -- passkeys -------------------------------------------------------------------------

    def _passkeys(self, txn: ReadTxn, holder_id: bytes) -> list[dict[str, Any]]:
        out = []
        for key, record in self._scan(txn, _KEY):
            if record["h"] == holder_id:
                out.append({**record, "key": key[1:]})
        return out

    def passkeys(self, holder_id: bytes) -> list[Passkey]:
        """The holder's passkeys, oldest first."""
        with self.store.read_txn() as txn:
            records = self._passkeys(txn, holder_id)
        return sorted(
            (Passkey(r["key"].hex(), r["t"], r.get("u"), r["n"]) for r in records),
            key=lambda p: (p.created_at, p.passkey_id),
        )

    def remove_passkey(self, holder_id: bytes, passkey_hex: str) -> bool:
        """Remove one of the holder's passkeys; every person token it signed in dies with it.
        Raises :class:`NotFound` for a passkey not the holder's."""
        try:
            passkey_id = bytes.fromhex(passkey_hex)
        except ValueError as err:
            raise MalformedInput("passkeyId must be hexadecimal") from err

        def remove(txn: _Writes) -> None:
            found = self._get(txn, _KEY + passkey_id) if len(passkey_id) == 32 else None
            if found is None or found["h"] != holder_id:
                raise NotFound("no such passkey", code=ErrorCode.NOT_FOUND)
            txn.unset(_KEY + passkey_id)

        self._write(remove)
        return True

    # -- grant labels -----------------------------------------------------------------------

    def name_grant(self, holder_id: bytes, grant_id: bytes, name: str) -> None:
        """Label one of the holder's grants (an empty name removes the label)."""
        if not isinstance(name, str) or len(name) > LABEL_MAX or not _printable(name):
            raise MalformedInput(f"a name is up to {LABEL_MAX} printable characters")
        key = _NAME + holder_id + grant_id

        def label(txn: _Writes) -> None:
            if name.strip():
                self._put(txn, key, {"n": name.strip()})
            else:
                txn.unset(key)

        self._write(label)

    def grant_names(self, holder_id: bytes) -> dict[str, str]:
        """grantId (hex) -> label, for the holder's labelled grants."""
        prefix = _NAME + holder_id
        out = {}
        with self.store.read_txn() as txn:
            for key, record in self._scan(txn, prefix):
                out[key[len(prefix) :].hex()] = record["n"]
        return out

    # -- edits ----------------------------------------------------------------------------------

    def record_edit(self, holder_id: bytes, new_cell: bytes, old_cell: bytes, at: int) -> None:
        """Note that the person's ``new_cell`` replaced ``old_cell`` (ids and time only: the old
        text was destroyed with its key). The public log does not say which cell a REMEMBER
        superseded, so the page asks here."""
        record = {"o": old_cell, "t": at}
        self._write(lambda txn: self._put(txn, _SUPERSEDED + holder_id + new_cell, record))

    def replaced(self, holder_id: bytes, cell_id: bytes) -> list[dict[str, object]]:
        """The cells ``cell_id`` replaced, newest first (``[{"cellId", "replacedAt"}]``)."""
        out: list[dict[str, object]] = []
        seen = {cell_id}
        with self.store.read_txn() as txn:
            current = cell_id
            while len(out) < HISTORY_MAX:
                record = self._get(txn, _SUPERSEDED + holder_id + current)
                if record is None:
                    break
                if record["o"] in seen:
                    break
                out.append({"cellId": record["o"].hex(), "replacedAt": record["t"]})
                seen.add(record["o"])
                current = record["o"]
        return out

    # -- what each grant read (the operator's own record, never the public log) ---------------

    def note_read(self, holder_id: bytes, grant_id: bytes, cells: int) -> Callable[[], None] | None:
        """Note that a grant's token read ``cells`` cells now. The public RECALL receipts name
        the holder, not the grant, so this is kept here, sealed. The note is in this worker's
        memory at once (the page sees it); the store is written at most every
        :data:`USE_FLUSH_SECONDS` seconds per grant: the write to run (off the event loop) is
        returned, or None."""
        key = _USE + holder_id + grant_id
        now = self.now()
        with self._reads_lock:
            self._reads.setdefault(key, []).append([now, cells])
            if now - self._flushed.get(key, -USE_FLUSH_SECONDS) < USE_FLUSH_SECONDS:
                return None
            self._flushed[key] = now
            pending = list(self._reads[key])

        def write() -> None:
            self._write_reads(key, pending)

        return write

    def _write_reads(self, key: bytes, pending: list[list[int]]) -> None:
        # Under the lock, so :meth:`grant_uses` sees each read once: in memory or stored.

        def add(txn: _Writes) -> None:
            record = self._get(txn, key) or {"reads": [], "calls": 0, "cells": 0}
            record["reads"] = (record["reads"] + pending)[-USE_READS_KEPT:]
            record["calls"] += len(pending)
            record["cells"] += sum(n for _, n in pending)
            self._put(txn, key, record)

        with self._reads_lock:
            self._write(add)
            waiting = self._reads.get(key, [])
            self._reads[key] = [r for r in waiting if all(r is not p for p in pending)]

    def grant_uses(self, holder_id: bytes) -> dict[str, dict[str, object]]:
        """grantId (hex) -> ``{"lastReadAt", "lastCells", "reads": [[when, cells]], "calls",
        "cells"}`` for the holder's grants that read (this worker's unwritten reads included)."""
        prefix = _USE + holder_id
        with self._reads_lock, self.store.read_txn() as txn:
            waiting = {k: list(v) for k, v in self._reads.items() if k.startswith(prefix)}
            found = dict(self._scan(txn, prefix))
        out: dict[str, dict[str, object]] = {}
        for key in set(found) | set(waiting):
            record = found.get(key) or {"reads": [], "calls": 0, "cells": 0}
            extra = waiting.get(key, [])
            reads = (record["reads"] + extra)[-USE_READS_KEPT:]
            out[key[len(prefix) :].hex()] = {
                "lastReadAt": reads[-1][0],
                "lastCells": reads[-1][1],
                "reads": [list(r) for r in reversed(reads)],
                "calls": record["calls"] + len(extra),
                "cells": record["cells"] + sum(n for _, n in extra),
            }
        return out


def note_grant_read(state: PersonState | None, token: str, cells: int) -> Callable[[], None] | None:
    """:meth:`PersonState.note_read` for an already verified token, when it is a grant's (the
    write to run off the event loop, or None); never raises: a read is answered whatever
    happens to its note."""
    if state is None:
        return None
    try:
        from saihm.events import Capability

        cap = Capability.from_token(token)
        if cap.scope.grant_id is None:
            return None
        write = state.note_read(cap.holder_id, cap.scope.grant_id, cells)
    except Exception as err:  # the note is best effort; the class only, never the token
        _log.warning("grant read not noted: %s", type(err).__name__)
        return None
    if write is None:
        return None

    def guarded() -> None:
        try:
            write()
        except Exception as err:
            _log.warning("grant read not written: %s", type(err).__name__)

    return guarded


def _printable(text: str) -> bool:
    import unicodedata

    return all(unicodedata.category(c)[0] not in "CZ" or c == " " for c in text)


def _same_origin(given: str | None, expected: str) -> None:
    """Refuse a request whose Origin header names another origin than the link's."""
    if given is not None and given != expected:
        raise NotPermitted("this request comes from another origin", code=ErrorCode.BAD_ORIGIN)


def _credential(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedInput("credential must be the JSON of a PublicKeyCredential")
    return value
