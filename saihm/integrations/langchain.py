"""A LangChain retriever over a SAIHM operator (``pip install 'saihm[langchain]'``).

:class:`SaihmRetriever` is a ``langchain_core.retrievers.BaseRetriever``: ``invoke(query)``
calls ``saihm_recall`` with ``query`` (the operator's keyword filter over the plaintext) and
returns one ``Document`` per cell, ``page_content`` = plaintext, ``metadata`` = ``cell_id``,
``kind``, ``namespace``, ``session_id``, ``timestamp``, ``shared_by_other_holder``. Cells of
the host's record (kind said/did/end) are left out unless ``include_records``. The number of
results is ``k`` (constructor or ``invoke(query, k=n)``). It holds an endpoint and an
``Authorization`` value (a secret, hidden from ``repr``), never a key; every read is a RECALL
receipt at the operator. Tested with ``langchain-tests``' ``RetrieversIntegrationTests``.
"""

from __future__ import annotations

from typing import Any

from saihm.integrations import require

require("langchain_core", "langchain")

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import Field, SecretStr  # noqa: E402

from saihm.client import AsyncClient, Client, RecalledCell  # noqa: E402

__all__ = ["SaihmRetriever"]


def _document(cell: RecalledCell) -> Document:
    metadata = {
        "cell_id": cell.cell_id,
        "kind": cell.kind or "memory",
        "namespace": cell.namespace,
        "session_id": cell.session_id,
        "timestamp": cell.timestamp,
        "shared_by_other_holder": cell.shared_by_other_holder,
    }
    return Document(page_content=cell.plaintext, metadata=metadata, id=cell.cell_id)


class SaihmRetriever(BaseRetriever):
    """Recall from a SAIHM operator as LangChain ``Document`` objects (see the module)."""

    endpoint: str
    auth_header: SecretStr
    k: int = Field(default=4, ge=1)
    include_records: bool = False
    ca_file: str | None = None
    tls_pin_sha256: str | None = None

    def _client_args(self) -> tuple[tuple[str, str], dict[str, Any]]:
        kwargs = {"ca_file": self.ca_file, "tls_pin_sha256": self.tls_pin_sha256}
        return (self.endpoint, self.auth_header.get_secret_value()), kwargs

    def _select(self, cells: list[RecalledCell], k: int | None) -> list[Document]:
        kept = [c for c in cells if self.include_records or not c.is_record]
        return [_document(c) for c in kept[: k or self.k]]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        args, kwargs = self._client_args()
        with Client(*args, **kwargs) as client:
            return self._select(client.recall(query or None), k)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> list[Document]:
        args, kwargs = self._client_args()
        async with AsyncClient(*args, **kwargs) as client:
            return self._select(await client.recall(query or None), k)
