"""Access: grants a person made and session revocations (GRANT / UNGRANT extension
operations, requirements.txt "Capabilities"; docs/formats.md "Session revocation")."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import ClassVar

from saihm.events.operations import Operation
from saihm.events.records import Body, GrantRecord, RevocationRecord
from saihm.projections.keys import LeafView
from saihm.projections.meta import Meta
from saihm.projections.tables import Handler, Projection, Txn

GRANTS = b"p_grants"  # grantId -> GrantRecord
REVOKED = b"p_session_revocations"  # revocation subject -> RevocationRecord (UNGRANT)


def revocation_subject(holder_id: bytes, token_or_session_id: bytes) -> bytes:
    """The subjectId of the UNGRANT that revokes every token of ``holder_id`` carrying this
    tokenId (16 bytes) or sessionId (32 bytes): SHA-256 of a label, the holderId and the id, so
    the public log does not show the id (docs/formats.md "Session revocation")."""
    label = b"saihm session revocation v1\x00"
    return hashlib.sha256(label + holder_id + token_or_session_id).digest()


class Grants(Projection):
    """Grant records and session revocations, both MAC-bound."""

    DB_NAMES = (GRANTS, REVOKED)
    SEALED = frozenset(DB_NAMES)

    __slots__ = ()

    # -- applying -------------------------------------------------------------------------

    def apply_grant(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """The first GRANT with a grantId files it (holder, namespaces, expiry)."""
        d = leaf.detail
        assert isinstance(d, dict)
        namespaces = d.get("namespaces")
        record = GrantRecord(
            holder=leaf.holder_id,
            namespaces=None if namespaces is None else tuple(namespaces),
            expires_at=d["expiresAt"],
            index=index,
            revoked=False,
        )
        self.t.put(txn, GRANTS, leaf.subject_id, record.encode(), overwrite=False)

    def apply_ungrant(self, txn: Txn, index: int, leaf: LeafView, body: Body | None) -> None:
        """UNGRANT withdraws a grant, or, when its subject names no grant, revokes the session
        tokens its subject stands for (docs/formats.md "Session revocation")."""
        if self.t.raw(txn, GRANTS, leaf.subject_id) is None:
            if self.t.raw(txn, REVOKED, leaf.subject_id) is None:
                revocation = RevocationRecord(leaf.holder_id, index)
                self.t.put(txn, REVOKED, leaf.subject_id, revocation.encode())
                Meta(self.t).count_revocation(txn)
            return
        record = self.get(txn, leaf.subject_id)
        if record is not None and record.holder == leaf.holder_id:
            self.t.put(
                txn,
                GRANTS,
                leaf.subject_id,
                GrantRecord(
                    record.holder, record.namespaces, record.expires_at, record.index, True
                ).encode(),
            )

    HANDLERS: ClassVar[Mapping[Operation, Handler]] = {
        Operation.GRANT: apply_grant,
        Operation.UNGRANT: apply_ungrant,
    }

    # -- queries --------------------------------------------------------------------------

    def get(self, txn: Txn, grant_id: bytes) -> GrantRecord | None:
        """The grant's record, or None (unknown, or its MAC fails: it widens nothing)."""
        raw = self.t.get(txn, GRANTS, grant_id)
        return None if raw is None else GrantRecord.decode(raw, authentic=True)

    def revocation(self, txn: Txn, subject: bytes) -> RevocationRecord | None:
        """The authentic revocation filed under ``subject``, or None."""
        raw = self.t.get(txn, REVOKED, subject)
        return None if raw is None else RevocationRecord.decode(raw, authentic=True)

    def subjects(self, txn: Txn) -> set[bytes]:
        """The subject of every authentic revocation record (a record whose MAC fails is
        skipped and logged: it cannot be counted towards the sealed count)."""
        return {bytes(subject) for subject, _ in self.t.scan(txn, REVOKED, b"")}
