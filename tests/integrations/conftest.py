"""A real ``saihm serve`` with a few memories and one record, shared by the adapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from saihm.client import Client
from tests.support.serve import holder_create, serving

TEAS = ["green tea in the morning", "tea with no sugar", "oolong tea on Fridays", "tea: jasmine"]


@pytest.fixture(scope="module")
def operator(tmp_path_factory) -> Iterator[tuple[str, str, list[str]]]:
    """(url, auth header, the tea memories) of a real operator with four tea memories, one
    record and one coffee memory."""
    tmp = tmp_path_factory.mktemp("lc")
    data = tmp / "data"
    # Lexical ranking only: these tests pin which memories the adapters return for "tea"; the
    # default semantic stage also finds "coffee after lunch" (a drink), which is ranking, tested
    # in tests/retrieval, not the adapters' concern.
    with serving(tmp, "--data", str(data), "--embedding-model", "none") as (_, url):
        auth = f"Bearer {holder_create(data)['token']}"
        with Client(url, auth) as client:
            for text in TEAS:
                client.remember(text)
            client.record("said", "Assistant said: more tea is coming")
            client.remember("coffee after lunch")
        yield url, auth, TEAS
