"""``Client``: the synchronous face of :class:`~saihm.client.AsyncClient`.

Each method builds its request with the sans-I/O core (saihm/client/_core.py) that
``AsyncClient`` uses too (every method but ``recall`` and ``status`` is inherited from its
table, ``_core.Methods``), and runs the one POST on a private event loop in one daemon thread,
so a ``Client`` works the same from plain scripts, from threads and from code that is already
inside a running event loop (where ``asyncio.run`` would fail). The loop keeps one
connection pool until :meth:`Client.close`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from saihm.client import _core, models
from saihm.client._async import AsyncClient
from saihm.client._lifecycle import SyncFace
from saihm.client._retry import DEFAULT_DEADLINE_SECONDS, DEFAULT_MAX_ATTEMPTS
from saihm.client._transport import DEFAULT_TIMEOUT_SECONDS, MAX_RESPONSE_BYTES

__all__ = ["Client"]

T = TypeVar("T")


class Client(SyncFace[AsyncClient], _core.Methods):
    """A synchronous client of one SAIHM operator; same arguments and methods as
    :class:`~saihm.client.AsyncClient`, each returning the same typed result or raising the
    same :class:`~saihm.client.ClientError`.

    Use it as a context manager, or call :meth:`close` when done.
    """

    _holder_id: str | None = None

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
        super().__init__(
            AsyncClient(
                endpoint,
                auth_header,
                timeout=timeout,
                ca_file=ca_file,
                tls_pin_sha256=tls_pin_sha256,
                max_response_bytes=max_response_bytes,
                names=names,
                max_attempts=max_attempts,
                retry_deadline=retry_deadline,
            ),
            "saihm-client",
        )

    def __repr__(self) -> str:
        return f"Client({self._async.endpoint_for_display!r})"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Self:
        """A client configured like ``saihm-mcp``: ``SAIHM_ENDPOINT_URL``, ``SAIHM_AUTH_HEADER``,
        ``SAIHM_TIMEOUT_SECONDS``, ``SAIHM_CA_FILE``, ``SAIHM_TLS_PIN_SHA256`` from ``env``."""
        client = cls.__new__(cls)
        SyncFace.__init__(client, AsyncClient.from_env(env), "saihm-client")
        return client

    @property
    def holder_id(self) -> str | None:
        """The caller's holderId once :meth:`status` (or :meth:`recall`) learned it."""
        return self._holder_id

    @property
    def endpoint_for_display(self) -> str:
        """The endpoint as it may appear in any text: ``scheme://host[:port]/path``."""
        return self._async.endpoint_for_display

    def call(self, method: str, params: dict[str, Any]) -> Any:
        """One raw binding call: the parsed 2xx JSON body."""
        return self._run(self._async.call(method, params))

    def _send(self, call: _core.Call[T]) -> T:
        return call.result(self.call(call.method, call.params))

    # -- the methods that learn the caller's holderId; the rest are _core.Methods ----------

    def recall(
        self,
        query: str | None = None,
        *,
        namespaces: list[str] | None = None,
        kinds: list[str] | None = None,
        limit: int | None = None,
    ) -> list[models.RecalledCell]:
        """saihm_recall (see :meth:`AsyncClient.recall`)."""
        if self.holder_id is None:
            self.status()
        return self._send(_core.recall(query, namespaces, kinds, limit, self.holder_id))

    def status(self) -> models.Status:
        """saihm_status (see :meth:`AsyncClient.status`); also remembers the caller's holderId
        (``holder_id``)."""
        result = self._send(_core.status())
        self._holder_id = result.agent_id_hash_hex
        return result
