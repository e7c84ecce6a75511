"""The synchronous Client against a real ``saihm serve`` (plain http on 127.0.0.1 and HTTPS
with a trustme certificate), from plain code and from inside a running event loop."""

from __future__ import annotations

import asyncio
import hashlib
import ssl
from pathlib import Path

import pytest
import trustme

from saihm.client import Client, ClientError
from tests.support.serve import holder_create, serving


def test_sync_client_round_trip_against_saihm_serve(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        alice, bob = holder_create(data), holder_create(data)
        with (
            Client(url, f"Bearer {alice['token']}") as a,
            Client(url, f"Bearer {bob['token']}") as b,
        ):
            cell = a.remember("sync: the kettle is blue")
            a.record("said", "Assistant said: the kettle is blue")
            found = a.recall("kettle")
            assert sorted(item.kind for item in found) == ["memory", "said"]
            # A recall with a query carries the operator's relevance score; one without, none.
            assert all(isinstance(item.score, float) and item.score > 0 for item in found)
            assert [item.score for item in a.recall()] == [None, None]
            assert a.holder_id == alice["holderId"]
            # The status says when the caller's token expires, and what kind of token it is.
            mine = a.status()
            assert (mine.token_expires_at, mine.token_sessions) == (alice["expiresAt"], "one")
            contract = a.share([bob["holderId"]], [cell.cell_id], "temporary")
            assert [c.contract_id for c in b.status().incoming_contracts or []] == [
                contract.contract_id
            ]
            b.accept_contract(contract.contract_id)
            (seen,) = b.recall()
            assert seen.shared_by_other_holder and seen.plaintext == "sync: the kettle is blue"
            with pytest.raises(ClientError) as caught:
                b.forget(cell.cell_id)
            assert caught.value.code == "not_holder"
        # A closed client can be used again: it starts a new loop thread.
        assert a.forget(cell.cell_id).success is True
        a.close()


async def test_sync_client_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    """asyncio.run would fail here; the client's own loop thread does not."""
    assert asyncio.get_running_loop() is not None
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        holder = holder_create(data)
        with Client(url, f"Bearer {holder['token']}") as client:
            assert client.status().agent_id_hash_hex == holder["holderId"]


def test_sync_client_over_https_with_ca_file_and_pin(tmp_path: Path) -> None:
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    leaf.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    der = ssl.PEM_cert_to_DER_cert(leaf.cert_chain_pems[0].bytes().decode())
    pin = hashlib.sha256(der).hexdigest()
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    data = tmp_path / "data"
    tls = ["--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem")]
    args = ("--data", str(data), *tls)
    with serving(tmp_path, *args, context=context, scheme="https") as (_, url):
        holder = holder_create(data)
        auth = f"Bearer {holder['token']}"
        with Client(url, auth, ca_file=str(tmp_path / "ca.pem"), tls_pin_sha256=pin) as client:
            assert client.remember("over tls").cell_id
        with pytest.raises(ClientError) as untrusted:
            Client(url, auth).status()
        assert untrusted.value.kind == "not_sent"
        with pytest.raises(ClientError) as mismatch:
            Client(url, auth, ca_file=str(tmp_path / "ca.pem"), tls_pin_sha256="11" * 32).status()
        assert mismatch.value.kind == "not_sent"


def test_a_client_never_closed_stops_its_thread_when_collected(tmp_path: Path) -> None:
    import gc
    import threading

    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        holder = holder_create(data)
        # Thread objects, not idents: an earlier test's client thread that ends meanwhile frees
        # its ident for this one (the flake seen in CI).
        before = {id(t): t for t in threading.enumerate() if t.name == "saihm-client"}
        client = Client(url, f"Bearer {holder['token']}")
        client.status()
        (thread,) = [
            t
            for t in threading.enumerate()
            if t.name == "saihm-client" and before.get(id(t)) is not t
        ]
        del client
        gc.collect()
        thread.join(timeout=10)
        assert not thread.is_alive()
