"""saihm.client: a Python client of any SAIHM operator, sync (:class:`Client`) and async
(:class:`AsyncClient`).

It speaks the protocol's HTTPS binding (every tool and the operator's extension methods) with
the transport rules of the MCP client: https only (plain http only to 127.0.0.1 or
localhost), certificate validation with an optional CA file and certificate pin, no
redirects, a timeout, a response bound enforced while reading, and errors (one type,
:class:`ClientError`, carrying the protocol error code) that never show the credential. It
holds no keys, does no cryptography beyond TLS and imports no store code. docs/integrations.md
has examples.

    from saihm.client import Client

    with Client("http://127.0.0.1:8080/", "Bearer " + token) as client:
        cell = client.remember("the tea is green")
        for item in client.recall("tea"):
            print(item.kind, item.plaintext)

:class:`Admin` and :class:`AsyncAdmin` are clients of the authority service (``saihm authority
serve``): create a user, open, renew and revoke sessions, grant cross-session recall.
"""

from saihm.client._async import AsyncClient, RecordKind
from saihm.client._endpoint import redact_endpoint
from saihm.client._sync import Client
from saihm.client.admin import (
    Admin,
    AsyncAdmin,
    Issued,
    PersonLink,
    RevokedGrant,
    RevokedSession,
)
from saihm.client.errors import ClientError
from saihm.client.models import (
    ContractAnswer,
    ContractSummary,
    Forgotten,
    IncomingContract,
    Proposal,
    Proposed,
    RecalledCell,
    Recorded,
    Remembered,
    Revoked,
    SessionForgotten,
    Shared,
    Status,
    Voted,
)

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncClient",
    "Client",
    "ClientError",
    "ContractAnswer",
    "ContractSummary",
    "Forgotten",
    "IncomingContract",
    "Issued",
    "PersonLink",
    "Proposal",
    "Proposed",
    "RecalledCell",
    "RecordKind",
    "Recorded",
    "Remembered",
    "Revoked",
    "RevokedGrant",
    "RevokedSession",
    "SessionForgotten",
    "Shared",
    "Status",
    "Voted",
    "redact_endpoint",
]
