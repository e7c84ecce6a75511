"""``AsyncClient``: every binding method over the HTTPS binding, with typed results.

saihm-protocol "HTTPS binding" and "Tool surface", and DESIGN.md "HTTP" for the extension
methods (saihm_accept_contract, saihm_decline_contract, saihm_record, saihm_forget_session)
and extension params (saihm_remember's ``namespace``). The client holds no keys and does no
cryptography beyond TLS; the credential is sent verbatim and never shown. What each method
sends and accepts is the sans-I/O core's (saihm/client/_core.py), which ``Client`` shares:
every method but ``recall`` and ``status`` is inherited from its table, ``_core.Methods``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from saihm.client import _core, models
from saihm.client._core import RecordKind
from saihm.client._env import read_env
from saihm.client._lifecycle import AsyncFace, open_target
from saihm.client._retry import (
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_MAX_ATTEMPTS,
    RetryPolicy,
    with_retries,
)
from saihm.client._transport import DEFAULT_TIMEOUT_SECONDS, MAX_RESPONSE_BYTES

__all__ = ["AsyncClient", "RecordKind"]

R = TypeVar("R")


class AsyncClient(AsyncFace, _core.Methods):
    """An asyncio client of one SAIHM operator.

    ``endpoint`` is the operator's binding URL (https; plain http only to 127.0.0.1 or
    localhost); ``auth_header`` the full Authorization value, e.g. ``"Bearer <token>"``.
    ``ca_file`` replaces the system trust store; ``tls_pin_sha256`` additionally pins the
    server certificate by the SHA-256 fingerprint of its DER form. Both the endpoint and the
    credential are checked here, before any connection, and are never shown in any error.

    Used as ``async with AsyncClient(...) as client:`` it keeps one connection pool for its
    calls; otherwise each call opens and closes its own.

    A call the operator refused without applying it (429 ``rate_limited``, or 503
    ``operator_storage_unavailable`` / ``operator_log_unavailable`` where that means nothing
    took effect) is sent again after the answer's ``Retry-After`` (else a jittered backoff):
    at most ``max_attempts`` calls in all (1 turns retrying off), and no wait ending more
    than ``retry_deadline`` seconds after the first call began (saihm/client/_retry.py).
    A timeout or a broken connection is never retried.
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
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        retry_deadline: float = DEFAULT_DEADLINE_SECONDS,
    ) -> None:
        self._retry = RetryPolicy(max_attempts, retry_deadline)
        super().__init__(
            open_target(
                endpoint,
                auth_header,
                names=names,
                timeout=timeout,
                ca_file=ca_file,
                tls_pin_sha256=tls_pin_sha256,
                max_response_bytes=max_response_bytes,
            )
        )
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
        return self._target.where

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """One raw binding call: the parsed 2xx JSON body, or :class:`ClientError`; a call
        refused without effect is retried as the class says."""
        payload = {"method": method, "params": params}
        return await with_retries(method, lambda: self._post(payload), self._retry)

    async def _send(self, call: _core.Call[R]) -> R:
        return call.result(await self.call(call.method, call.params))

    # -- the methods that learn the caller's holderId; the rest are _core.Methods ----------

    async def recall(
        self,
        query: str | None = None,
        *,
        namespaces: list[str] | None = None,
        kinds: list[str] | None = None,
        limit: int | None = None,
    ) -> list[models.RecalledCell]:
        """saihm_recall: own cells in the token's scope and cells of accepted shares.

        Memory and the host's record come back together; ``RecalledCell.kind`` tells them
        apart. Cells of another holder are marked ``shared_by_other_holder`` (conformance
        item 9); the caller's holderId is learned from saihm_status first when unknown.
        ``namespaces``, ``kinds`` and ``limit`` are the operator's extension params
        (docs/retrieval.md "Extension params"): they only narrow the answer.
        """
        if self.holder_id is None:
            await self.status()
        return await self._send(_core.recall(query, namespaces, kinds, limit, self.holder_id))

    async def status(self) -> models.Status:
        """saihm_status; also remembers the caller's holderId (``holder_id``)."""
        result = await self._send(_core.status())
        self.holder_id = result.agent_id_hash_hex
        return result
