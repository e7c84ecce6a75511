"""langchain-tests' published retriever contract (``RetrieversIntegrationTests``), run
unchanged against :class:`SaihmRetriever` over a real ``saihm serve``."""

from __future__ import annotations

import pytest

from tests.support.optional import require_module

require_module("langchain_core", "langchain")
require_module("langchain_tests", "integrations-test")

from langchain_tests.integration_tests import RetrieversIntegrationTests

from saihm.integrations.langchain import SaihmRetriever


class TestSaihmRetrieverStandard(RetrieversIntegrationTests):
    """langchain-tests' published retriever contract, run unchanged."""

    @pytest.fixture(autouse=True)
    def _operator(self, operator) -> None:
        self._url, self._auth, _ = operator

    @property
    def retriever_constructor(self) -> type[SaihmRetriever]:
        return SaihmRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"endpoint": self._url, "auth_header": self._auth}

    @property
    def retriever_query_example(self) -> str:
        return "tea"
