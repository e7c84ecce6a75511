"""``AsyncClient``: every binding method over the HTTPS binding, with typed results.

saihm-protocol "HTTPS binding" and "Tool surface", and DESIGN.md "HTTP" for the extension
methods (saihm_accept_contract, saihm_decline_contract, saihm_record, saihm_forget_session)
and extension params (saihm_remember's ``namespace``). The client holds no keys and does no
cryptography beyond TLS; the credential is sent verbatim and never shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import aiohttp
from pydantic import BaseModel, ValidationError

from saihm.client import _checks
from saihm.client._endpoint import (
    check_auth_header,
    parse_pin,
    redact_endpoint,
    validate_endpoint,
)
from saihm.client._env import read_env
from saihm.client._transport import (
    DEFAULT_TIMEOUT_SECONDS,
    MAX_RESPONSE_BYTES,
    Target,
    make_ssl_context,
    new_session,
    post,
)
from saihm.client.errors import ClientError
from saihm.client.models import (
    ContractAnswer,
    Forgotten,
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

__all__ = ["AsyncClient", "RecordKind"]

M = TypeVar("M", bound=BaseModel)
RecordKind = Literal["said", "did", "end"]
_RECORD_KINDS = ("said", "did", "end")


def _parse(model: type[M], body: Any, method: str) -> M:
    """``body`` as ``model``, or a ``malformed`` :class:`ClientError` (the outcome is unknown)."""
    if not isinstance(body, dict):
        raise ClientError(
            f"malformed response to {method}: the result is not a JSON object; "
            "the operator may or may not have acted",
            kind="malformed",
        )
    try:
        return model.model_validate(body)
    except ValidationError as err:
        # Name the model's own fields that failed, never a value or an operator-chosen key.
        known = {f.alias or name for name, f in model.model_fields.items()}
        failed = {str(e["loc"][0]) for e in err.errors() if e["loc"]}
        shown = ", ".join(sorted(failed & known)[:5])
        raise ClientError(
            f"malformed response to {method} (fields: {shown or 'unnamed'}); "
            "the operator may or may not have acted",
            kind="malformed",
        ) from err


class AsyncClient:
    """An asyncio client of one SAIHM operator.

    ``endpoint`` is the operator's binding URL (https; plain http only to 127.0.0.1 or
    localhost); ``auth_header`` the full Authorization value, e.g. ``"Bearer <token>"``.
    ``ca_file`` replaces the system trust store; ``tls_pin_sha256`` additionally pins the
    server certificate by the SHA-256 fingerprint of its DER form. Both the endpoint and the
    credential are checked here, before any connection, and are never shown in any error.

    Used as ``async with AsyncClient(...) as client:`` it keeps one connection pool for its
    calls; otherwise each call opens and closes its own.
    """

    def __init__(
        self,
        endpoint: str,
        auth_header: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        ca_file: str | None = None,
        tls_pin_sha256: str | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        names: tuple[str, str] = ("endpoint", "auth_header"),
    ) -> None:
        endpoint_name, auth_name = names
        url = validate_endpoint(endpoint, endpoint_name, auth_name)
        auth = check_auth_header(auth_header, auth_name)
        pin = parse_pin(tls_pin_sha256)
        if not timeout > 0:
            raise ClientError("timeout must be a positive number of seconds", kind="config")
        context = make_ssl_context(ca_file) if url.startswith("https:") else None
        if pin is not None and context is None:
            raise ClientError("a certificate pin needs an https endpoint", kind="config")
        self._target = Target(url, auth, context, pin, float(timeout), max_response_bytes)
        self._session: aiohttp.ClientSession | None = None
        self.holder_id: str | None = None

    def __repr__(self) -> str:
        return f"AsyncClient({self.endpoint_for_display!r})"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Self:
        """A client configured like ``saihm-mcp``: ``SAIHM_ENDPOINT_URL``, ``SAIHM_AUTH_HEADER``,
        ``SAIHM_TIMEOUT_SECONDS``, ``SAIHM_CA_FILE``, ``SAIHM_TLS_PIN_SHA256`` from ``env``."""
        settings = read_env(env)
        return cls(
            settings.endpoint_url or "",
            settings.auth_header or "",
            timeout=settings.timeout_seconds,
            ca_file=settings.ca_file,
            tls_pin_sha256=settings.tls_pin_sha256,
            names=("SAIHM_ENDPOINT_URL", "SAIHM_AUTH_HEADER"),
        )

    @property
    def endpoint_for_display(self) -> str:
        """The endpoint as it may appear in any text: ``scheme://host[:port]/path``."""
        return redact_endpoint(self._target.url)

    async def __aenter__(self) -> Self:
        if self._session is None:
            self._session = new_session(self._target)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool (if ``async with`` opened one)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """One raw binding call: the parsed 2xx JSON body, or :class:`ClientError`."""
        return await post(self._target, method, params, self._session)

    # -- the eight tools --------------------------------------------------------------------

    async def remember(self, content: str, *, namespace: str | None = None) -> Remembered:
        """saihm_remember: store ``content`` as a new cell of the token's session.

        ``namespace`` (extension, default "memory" at the operator) must lie in the token's
        scope. Blank content is refused before sending.
        """
        params: dict[str, Any] = {"content": _checks.check_content(content)}
        if namespace is not None:
            params["namespace"] = namespace
        return _parse(Remembered, await self.call("saihm_remember", params), "saihm_remember")

    async def recall(
        self,
        query: str | None = None,
        *,
        namespaces: list[str] | None = None,
        kinds: list[str] | None = None,
        limit: int | None = None,
    ) -> list[RecalledCell]:
        """saihm_recall: own cells in the token's scope and cells of accepted shares.

        Memory and the host's record come back together; ``RecalledCell.kind`` tells them
        apart. Cells of another holder are marked ``shared_by_other_holder`` (conformance
        item 9); the caller's holderId is learned from saihm_status first when unknown.
        ``namespaces``, ``kinds`` and ``limit`` are the operator's extension params
        (docs/retrieval.md "Extension params"): they only narrow the answer.
        """
        if self.holder_id is None:
            await self.status()
        params: dict[str, Any] = {} if query is None else {"query": query}
        if namespaces is not None:
            params["namespaces"] = list(namespaces)
        if kinds is not None:
            params["kinds"] = list(kinds)
        if limit is not None:
            params["limit"] = limit
        body = await self.call("saihm_recall", params)
        if not isinstance(body, list):
            raise ClientError(
                "malformed response to saihm_recall: the result is not an array", kind="malformed"
            )
        cells = []
        for element in body:
            if isinstance(element, dict):
                holder = element.get("holderIdHex")
                mine = (
                    self.holder_id is not None
                    and isinstance(holder, str)
                    and holder.lower() == self.holder_id.lower()
                )
                element = {**element, "sharedByOtherHolder": not mine}
            cells.append(_parse(RecalledCell, element, "saihm_recall"))
        return cells

    async def forget(self, cell_id: str) -> Forgotten:
        """saihm_forget: erase one cell; ``success`` false means not found or already erased.

        A result with ``success`` true must name the requested cell, else it is malformed.
        """
        result = _parse(Forgotten, await self.call("saihm_forget", {"id": cell_id}), "saihm_forget")
        if result.success and result.cell_id != cell_id:
            raise ClientError(
                "malformed response to saihm_forget: success without the requested cellId; "
                "the cell may still be stored",
                kind="malformed",
            )
        return result

    async def status(self) -> Status:
        """saihm_status; also remembers the caller's holderId (``holder_id``)."""
        result = _parse(Status, await self.call("saihm_status", {}), "saihm_status")
        self.holder_id = result.agent_id_hash_hex
        return result

    async def share(
        self,
        grantees: list[str],
        shard_ids: list[str],
        mode: Literal["temporary", "permanent", "syndicate"],
        *,
        scope: Literal["read", "write", "readwrite"] = "read",
        expiry_epoch: str | int | None = None,
    ) -> Shared:
        """saihm_share: a contract giving ``grantees`` read access to ``shard_ids``.

        It takes effect for a grantee only once that grantee accepts it
        (:meth:`accept_contract`). Grantee, shard and expiry checks run before sending.
        """
        expiry = str(expiry_epoch) if isinstance(expiry_epoch, int) else expiry_epoch
        params = {
            "granteeIdHashesHex": _checks.check_grantees(list(grantees)),
            "shardIds": _checks.check_shard_ids(list(shard_ids)),
            "type": mode.lower(),
            "scope": scope,
            "expiryEpoch": _checks.check_expiry_epoch(expiry),
        }
        return _parse(Shared, await self.call("saihm_share", params), "saihm_share")

    async def revoke_share(self, contract_id: str) -> Revoked:
        """saihm_revoke_share: end a contract for every grantee (future reads only)."""
        body = await self.call("saihm_revoke_share", {"contractId": contract_id})
        result = _parse(Revoked, body, "saihm_revoke_share")
        if not result.revoked:
            raise ClientError(
                "revocation not confirmed (revoked is not true): treat access as still in force",
                kind="malformed",
            )
        return result

    async def governance_propose(
        self,
        scope: Literal["emission_param", "protocol_upgrade"],
        param_key: str | None = None,
        proposed_value: str | None = None,
    ) -> Proposed:
        """saihm_governance_propose, where the operator enables governance."""
        _checks.check_proposal(scope, param_key, proposed_value)
        params = {"scope": scope, "paramKey": param_key, "proposedValue": proposed_value}
        body = await self.call("saihm_governance_propose", params)
        return _parse(Proposed, body, "saihm_governance_propose")

    async def governance_vote(self, proposal_id: str, approve: bool) -> Voted:
        """saihm_governance_vote: the vote recorded (a repeat returns the first vote).

        Compare ``approve`` and ``proposal_id`` with the request: a differing answer means an
        earlier vote stands.
        """
        params = {"proposalId": proposal_id, "approve": bool(approve)}
        body = await self.call("saihm_governance_vote", params)
        result = _parse(Voted, body, "saihm_governance_vote")
        if result.weight is None and result.cast_at_epoch is None:
            raise ClientError(
                "vote unconfirmed: the response carries neither weight nor castAtEpoch",
                kind="malformed",
            )
        return result

    # -- extension methods (DESIGN.md "HTTP") ---------------------------------------------

    async def accept_contract(self, contract_id: str) -> ContractAnswer:
        """saihm_accept_contract: the grantee accepts (its cells then appear in recall)."""
        body = await self.call("saihm_accept_contract", {"contractId": contract_id})
        return _parse(ContractAnswer, body, "saihm_accept_contract")

    async def decline_contract(self, contract_id: str) -> ContractAnswer:
        """saihm_decline_contract: the grantee declines, or withdraws an earlier acceptance."""
        body = await self.call("saihm_decline_contract", {"contractId": contract_id})
        return _parse(ContractAnswer, body, "saihm_decline_contract")

    async def record(self, kind: RecordKind, content: str) -> Recorded:
        """saihm_record: append what the agent said ("said") or did ("did") to the session's
        record, or close it ("end", content may be empty). Entries are chained (seq, prev)
        and can never be altered; they come back from :meth:`recall` with their ``kind``.
        """
        if kind not in _RECORD_KINDS:
            raise ClientError(
                "refused before sending: kind must be said, did or end", kind="refused"
            )
        if kind != "end":
            _checks.check_content(content)
        params = {"kind": kind, "content": content}
        return _parse(Recorded, await self.call("saihm_record", params), "saihm_record")

    async def forget_session(self, session_id: str) -> SessionForgotten:
        """saihm_forget_session: erase every cell (memory and record) of one session; every
        receipt stays in the log."""
        body = await self.call("saihm_forget_session", {"sessionId": session_id})
        return _parse(SessionForgotten, body, "saihm_forget_session")
