"""Namespaces are names at every entry (issue #32 item 6; docs/formats.md "Namespaces"): the
binding's remember and recall, the operator's write and grant paths, the authority service's
grant and the command line refuse a namespace that is not a name with ``bad_namespace``, and
nothing is written."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest

from saihm.names import BadNamespace
from tests.support.serve import SAIHM

#: The red team's labels, and a few more of each kind.
BAD = ["a\x00b", "a\nb", "evil\u202etxt", "zero\u200bwidth", " lead", "", "x" * 257, "\ud800"]


@pytest.mark.parametrize("bad", BAD)
async def test_remember_refuses_a_namespace_that_is_not_a_name(
    client, holder, call, operator, bad: str
) -> None:
    size = operator.store.size()
    status, body = await call(client, holder, "saihm_remember", {"content": "x", "namespace": bad})
    assert (status, body) == (400, {"error": "bad_namespace"})
    assert operator.store.size() == size  # nothing written


@pytest.mark.parametrize("bad", BAD)
async def test_recall_refuses_a_namespace_filter_that_is_not_a_name(
    client, holder, call, bad: str
) -> None:
    status, body = await call(client, holder, "saihm_recall", {"namespaces": ["memory", bad]})
    assert (status, body) == (400, {"error": "bad_namespace"})


async def test_a_namespace_that_is_a_name_is_written_and_recalled(client, holder, call) -> None:
    params = {"content": "über notes", "namespace": "mes notes 日本"}
    status, _ = await call(client, holder, "saihm_remember", params)
    assert status == 200
    status, cells = await call(client, holder, "saihm_recall", {"namespaces": ["mes notes 日本"]})
    assert status == 200 and [c["namespace"] for c in cells] == ["mes notes 日本"]


@pytest.mark.parametrize("bad", BAD)
def test_the_operator_refuses_it_below_every_edge(operator, holder, bad: str) -> None:
    size = operator.store.size()
    access = operator.store.authenticate(holder.token)
    with pytest.raises(BadNamespace):
        operator.memory.remember(access, "x", namespace=bad)
    with pytest.raises(BadNamespace):
        operator.admin.grant(holder.holder_id, ["ok", bad], 2_000_000_000)
    assert operator.store.size() == size


@pytest.mark.parametrize("bad", BAD)
async def test_the_authority_service_refuses_it_in_a_grant(
    aiohttp_client, operator, authority, holder, bad: str
) -> None:
    from saihm.services.authority import AuthorityService, create_authority_app

    credential = "saihm-admin-test"
    digest = hashlib.sha256(credential.encode()).digest()
    client = await aiohttp_client(
        create_authority_app(AuthorityService(operator, authority, digest, 60))
    )
    size = operator.store.size()
    body = {"holderId": holder.hex, "namespaces": ["work", bad]}
    async with client.post(
        "/v1/grants", json=body, headers={"Authorization": f"Bearer {credential}"}
    ) as resp:
        assert (resp.status, await resp.json()) == (400, {"error": "bad_namespace"})
    assert operator.store.size() == size


def test_saihm_grant_refuses_it_in_one_line(operator, holder, config) -> None:
    size = operator.store.size()
    grant = [SAIHM, "grant", "--data", str(config.data_dir), "--holder", holder.hex]
    for namespaces in ("work, home", "work,zero\u200bwidth", "a\u202eb"):
        done = subprocess.run(
            [*grant, "--sessions", "all", "--namespaces", namespaces],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2 and done.stdout == ""
        [line] = done.stderr.strip().splitlines()
        assert "namespace" in line and "Traceback" not in line
    assert operator.store.size() == size
    ok = subprocess.run(
        [*grant, "--sessions", "all", "--namespaces", "work,home", "--ttl", "60"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(ok.stdout)["scope"]["namespaces"] == ["work", "home"]
