"""Host-side commands against a real ``saihm serve``: ``saihm record``, ``saihm contract`` and
``saihm mcp-config`` (DESIGN.md "Pinned additions"), configured like ``saihm-mcp``."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path

import mcp
import pytest
from mcp import StdioServerParameters

from saihm.mcp import ClientConfig, OperatorClient, build_mcp
from tests.support.cli import run_saihm
from tests.support.serve import SAIHM, holder_create, serving


def host(url: str, token: str, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {"SAIHM_ENDPOINT_URL": url, "SAIHM_AUTH_HEADER": f"Bearer {token}"}
    return run_saihm(*argv, env=env, input=stdin, timeout=60)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """One operator for the module; every test makes its own holders, so none sees another's."""
    tmp = tmp_path_factory.mktemp("hostcli")
    data = tmp / "data"
    with serving(tmp, "--data", str(data)) as (_, url):
        yield url, data


@pytest.mark.anyio
async def test_record_from_the_command_line_comes_back_in_one_recall_marked_by_kind(
    served,
) -> None:
    """Done when: the record written by ``saihm record`` comes back in one recall with
    memory, marked by kind in the MCP report."""
    url, data = served
    holder = holder_create(data)
    cfg = ClientConfig(endpoint_url=url, auth_header=f"Bearer {holder['token']}")
    async with mcp.Client(build_mcp(OperatorClient(cfg)), raise_exceptions=True) as agent:
        stored = await agent.call_tool("saihm_remember", {"content": "The user likes jasmine tea"})
        assert stored.structured_content["status"] == "stored"
        said = host(url, holder["token"], "record", "Assistant said: I ordered jasmine tea")
        did = host(url, holder["token"], "record", "--kind", "did", "-", stdin="order(tea)")
        assert said.returncode == 0 and did.returncode == 0, said.stderr + did.stderr
        assert json.loads(said.stdout)["kind"] == "said" and json.loads(did.stdout)["seq"] == 1

        recalled = await agent.call_tool("saihm_recall", {"query": "tea"})
    cells = recalled.structured_content["cells"]
    assert sorted(c["kind"] for c in cells) == ["did", "memory", "said"]
    text = recalled.content[0].text
    ids = {c["kind"]: c["cellId"] for c in cells}
    # Listed by full cellIds (docs/mcp.md): the record marked apart, memory as its text.
    said_id, did_id, memory_id = (ids[k] for k in ("said", "did", "memory"))
    assert f"[{said_id}] RECORD said: the host's record of what was said, not a stored" in text
    assert f"[{did_id}] RECORD did: the host's record of an action taken" in text
    assert f"[{memory_id}] The user likes jasmine tea" in text
    assert f"[{said_id}] Assistant said" not in text and f"[{did_id}] order" not in text
    assert holder["token"] not in said.stdout + said.stderr


def test_record_end_closes_the_record_and_later_entries_are_refused(served) -> None:
    url, data = served
    token = holder_create(data)["token"]
    assert host(url, token, "record", "--kind", "end", "").returncode == 0
    late = host(url, token, "record", "too late")
    assert late.returncode == 2 and late.stdout == ""
    assert len(late.stderr.strip().splitlines()) == 1 and "record_ended" in late.stderr


@pytest.mark.parametrize(
    ("argv", "stdin"),
    [
        (["record", "  "], None),
        (["record", "-"], "\n\n"),
        (["record", "--kind", "memory", "x"], None),
    ],
)
def test_bad_record_input_is_one_line_and_records_nothing(served, argv, stdin) -> None:
    url, data = served
    holder = holder_create(data)
    done = host(url, holder["token"], *argv, stdin=stdin)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    from saihm.client import Client

    with Client(url, f"Bearer {holder['token']}") as client:
        assert client.recall() == []


def test_record_from_stdin_that_is_not_utf8_is_refused(served) -> None:
    url, data = served
    holder = holder_create(data)
    env = {
        **os.environ,
        "SAIHM_ENDPOINT_URL": url,
        "SAIHM_AUTH_HEADER": f"Bearer {holder['token']}",
    }
    done = subprocess.run(
        [SAIHM, "record", "-"], env=env, input=b"\xff\xfe bad", capture_output=True, timeout=60
    )
    assert done.returncode == 2 and b"not UTF-8" in done.stderr and b"Traceback" not in done.stderr
    from saihm.client import Client

    with Client(url, f"Bearer {holder['token']}") as client:
        assert client.recall() == []


def test_rejected_token_names_the_fix_and_never_echoes_the_token(served) -> None:
    url, _ = served
    done = host(url, "forged-token-s3cr3t", "record", "hello")
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert "unauthenticated" in done.stderr and "saihm session renew" in done.stderr
    assert "s3cr3t" not in done.stderr


def test_no_endpoint_configured_is_one_line_and_nothing_sent(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAIHM_")}
    done = subprocess.run([SAIHM, "record", "x"], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "SAIHM_ENDPOINT_URL is not set" in done.stderr


def test_contract_withdraw_is_refused_for_a_contract_not_accepted(served) -> None:
    url, data = served
    bob = holder_create(data)
    done = host(url, bob["token"], "contract", "withdraw", "ab" * 32)
    assert done.returncode == 2 and "not one you have accepted" in done.stderr
    missing = host(url, bob["token"], "contract", "accept", "ab" * 32)
    assert missing.returncode == 2 and "contract_not_found" in missing.stderr


# -- mcp-config --------------------------------------------------------------------------------


def _mcp_config(*argv: str, env: dict[str, str]) -> tuple[dict, str]:
    done = subprocess.run(
        [SAIHM, "mcp-config", *argv], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout), done.stderr


@pytest.mark.anyio
@pytest.mark.parametrize("host_name", ["claude-code"])  # claude-desktop: docs/mcp.md's example
async def test_mcp_config_starts_a_working_saihm_mcp_by_absolute_path(
    served, host_name: str
) -> None:
    url, data = served
    token = holder_create(data)["token"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("SAIHM_")}
    shell = {**base, "SAIHM_AUTH_HEADER": f"Bearer {token}"}
    config, note = _mcp_config("--host", host_name, "--endpoint", url, env=shell)
    server = config["mcpServers"]["saihm"]
    assert Path(server["command"]).is_absolute() and Path(server["command"]).exists()
    if host_name == "claude-code":
        assert server["type"] == "stdio"
        assert server["env"]["SAIHM_AUTH_HEADER"] == "${SAIHM_AUTH_HEADER}"
        assert token not in json.dumps(config) + note
        server["env"]["SAIHM_AUTH_HEADER"] = f"Bearer {token}"  # what Claude Code expands
    else:
        assert server["env"]["SAIHM_AUTH_HEADER"] == f"Bearer {token}" and "private" in note
    # Start it as a host would: that command, those args, that env and an empty PATH.
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env={**server["env"], "PATH": ""}
    )
    async with mcp.Client(params) as client:
        tools = await client.list_tools()
        status = await client.call_tool("saihm_status", {})
    assert len(tools.tools) == 8
    assert status.structured_content["status"] == "ok"


def test_mcp_config_for_cursor_is_the_mcp_servers_form_of_claude_desktop() -> None:
    env = {**os.environ, "SAIHM_AUTH_HEADER": "Bearer t"}
    cursor, note = _mcp_config("--host", "cursor", env=env)
    desktop, _ = _mcp_config("--host", "claude-desktop", env=env)
    assert cursor == desktop and "cursor/mcp.json" in note


def test_mcp_config_without_a_credential_prints_a_placeholder_and_refuses_bad_urls() -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SAIHM_")}
    config, note = _mcp_config(env=base)
    server = config["mcpServers"]["saihm"]
    assert server["env"]["SAIHM_ENDPOINT_URL"] == "http://127.0.0.1:8080/"
    assert server["env"]["SAIHM_AUTH_HEADER"].startswith("Bearer <") and "placeholder" in note
    bad = subprocess.run(
        [SAIHM, "mcp-config", "--endpoint", "http://user:pw@example.com/"],
        env=base,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "pw" not in bad.stderr and bad.stdout == ""


def test_two_processes_recording_into_one_session_keep_one_unbroken_chain(served) -> None:
    """Shared state, two processes: concurrent ``saihm record`` calls into one session each get
    their own place in the chain (seq 0..n-1, each prev the cell before)."""
    url, data = served
    token = holder_create(data)["token"]
    env = {**os.environ, "SAIHM_ENDPOINT_URL": url, "SAIHM_AUTH_HEADER": f"Bearer {token}"}
    loop = 'for i in 1 2 3 4; do {saihm} record --kind did "$0 step $i" || exit 1; done'
    procs = [
        subprocess.Popen(
            ["bash", "-c", loop.format(saihm=SAIHM), name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("alpha", "beta")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    entries = [json.loads(line) for out, _ in outs for line in out.splitlines()]
    by_seq = sorted(entries, key=lambda e: e["seq"])
    assert [e["seq"] for e in by_seq] == list(range(8))
    assert by_seq[0].get("prev") is None
    assert all(b["prev"] == a["cellId"] for a, b in itertools.pairwise(by_seq))


@pytest.mark.anyio
async def test_grantee_sees_incoming_contracts_in_the_mcp_status_and_accepts_on_the_cli(
    served,
) -> None:
    """Sharing end to end against the real operator: the grantee's MCP status report shows
    the waiting contract and the command that accepts it; after ``saihm contract accept`` the
    shared cell is in the grantee's recall, marked."""
    url, data = served
    alice, bob = holder_create(data), holder_create(data)
    from saihm.client import Client

    with Client(url, f"Bearer {alice['token']}") as owner:
        cell = owner.remember("shared by alice: the code word is heron")
        contract = owner.share([bob["holderId"]], [cell.cell_id], "permanent").contract_id
    cfg = ClientConfig(endpoint_url=url, auth_header=f"Bearer {bob['token']}")
    async with mcp.Client(build_mcp(OperatorClient(cfg)), raise_exceptions=True) as agent:
        before = (await agent.call_tool("saihm_status", {})).content[0].text
        assert f"INCOMING CONTRACT [{contract}] from holder {alice['holderId']}" in before
        assert (
            f"not accepted, a person accepts it with `saihm contract accept {contract}`" in before
        )
        listed = host(url, bob["token"], "contract", "list")
        assert [c["contractId"] for c in json.loads(listed.stdout)["incoming"]] == [contract]
        accepted = host(url, bob["token"], "contract", "accept", contract)
        assert accepted.returncode == 0 and json.loads(accepted.stdout)["accepted"] is True
        after = (await agent.call_tool("saihm_status", {})).content[0].text
        recalled = await agent.call_tool("saihm_recall", {"query": "heron"})
    assert "accepted (its cells appear in recall, marked shared)" in after
    (seen,) = recalled.structured_content["cells"]
    assert seen["sharedByOtherHolder"] is True and "SHARED BY ANOTHER HOLDER" in (
        recalled.content[0].text
    )
