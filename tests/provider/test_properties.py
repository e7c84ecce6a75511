"""Hypothesis: for random records and grants, a consumer sees exactly its granted namespaces."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saihm.errors import NotPermitted
from saihm.provider.models import MemoryQuery

from .conftest import make_vault

NAMESPACES = ["prefs", "projects", "health", "work"]
records = st.lists(
    st.tuples(st.sampled_from(NAMESPACES), st.integers(0, 10**6)), min_size=0, max_size=8
)
grants = st.lists(st.sets(st.sampled_from(NAMESPACES), min_size=1), min_size=1, max_size=3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records,
    grants=grants,
    limit=st.integers(1, 10),
    ask=st.sets(st.sampled_from(NAMESPACES)),
)
def test_random_grants_never_leak(records, grants, limit, ask):
    with tempfile.TemporaryDirectory() as tmp:
        world, store = make_vault(Path(tmp))
        try:
            ids = {}
            for namespace, n in records:
                ids[world.put(namespace, {"n": n})] = namespace
            for i, granted in enumerate(grants):
                name = f"c{i}"
                provider = world.consumer(name, sorted(granted))
                query = MemoryQuery(consumer=name, namespaces=tuple(sorted(ask)), limit=limit)
                if not ask <= granted:
                    try:
                        provider.query(query)
                    except NotPermitted:
                        continue
                    raise AssertionError("a namespace outside the grant was answered")
                window = ask or granted
                expected = [rid for rid, ns in ids.items() if ns in window][::-1]
                excerpt = provider.query(query)
                got = [r.id for r in excerpt.records]
                assert got == expected[:limit]
                assert excerpt.truncated == (len(expected) > limit)
                assert all(r.namespace in granted for r in excerpt.records)
        finally:
            store.close()
