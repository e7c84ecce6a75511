"""``saihm authority serve --store postgresql://...`` beside ``saihm serve`` on the same
PostgreSQL store (docs/authority.md "Starting it"): users, sessions and grants made over the
service are seen by the operator node, and the data directory holds no store."""

from __future__ import annotations

from pathlib import Path

from saihm.client import Admin, Client, ClientError
from tests.support.serve import authority_serving, serving


def test_the_authority_service_works_on_a_postgresql_store(
    tmp_path: Path, postgres_location: str
) -> None:
    data = tmp_path / "data"
    store = ["--store", postgres_location]
    with (
        serving(tmp_path, "--data", str(data), *store) as (_, node),
        authority_serving(tmp_path, data, tmp_path / "authority", *store) as (_, url, secret),
        Admin(url, secret) as admin,
    ):
        user = admin.create_holder()
        with Client(node, f"Bearer {user.token}") as agent:
            agent.remember("postgres: first session")
        second = admin.open_session(user.holder_id)
        granted = admin.grant(user.holder_id)
        with Client(node, f"Bearer {granted.token}") as across:
            assert [c.plaintext for c in across.recall("postgres")] == ["postgres: first session"]
        admin.revoke_session(user.holder_id, second.session_id)
        with Client(node, f"Bearer {second.token}") as agent:
            try:
                agent.status()
            except ClientError as err:
                assert err.http_status == 401
            else:
                raise AssertionError("a revoked session's token was accepted")
    assert not (data / "lmdb").exists()
    assert postgres_location not in (tmp_path / "authority.err").read_text()
