"""docs/integrations.md and docs/mcp.md, tested as written against a real ``saihm serve``: the
two-holder sharing walkthrough, the Claude Code hook that appends turns to the record, and the
local-server MCP host example."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import mcp
import pytest
from mcp import StdioServerParameters

from saihm.client import Client
from saihm.events import Capability
from saihm.mcp.server import TOOL_NAMES
from tests.support.serve import ROOT, holder_create, serving

DOC = ROOT / "docs" / "integrations.md"


def _block(pattern: str) -> str:
    blocks = re.findall(pattern, DOC.read_text(), re.S)
    assert len(blocks) == 1, f"docs/integrations.md needs exactly one block matching {pattern}"
    return blocks[0]


def _run_as_written(script: str, url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a shell block of the docs in ``cwd`` with its example endpoint replaced by ``url``
    and without this process's ``SAIHM_*`` variables (the block sets what it needs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAIHM_")}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script.replace("http://127.0.0.1:8080/", url)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_two_holder_sharing_walkthrough_runs_as_written(tmp_path: Path) -> None:
    script = _block(r"```sh sharing\n(.*?)```")
    assert script.count("http://127.0.0.1:8080/") == 1
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    with serving(tmp_path, "--data", "./saihm-data") as (_, url):
        done = _run_as_written(script, url, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    listed = json.loads(lines[0])
    (incoming,) = listed["incoming"]
    assert incoming["accepted"] is False and incoming["mode"] == "TEMPORARY"
    assert lines[1] == "0 cell(s)"
    accepted = json.loads(lines[2])
    assert accepted == {
        "contractId": incoming["contractId"],
        "accepted": True,
        "receiptId": accepted["receiptId"],
    }
    assert lines[3:5] == ["1 cell(s)", "shared Alice: the launch moved to Friday."]
    withdrawn = json.loads(lines[5])
    assert withdrawn["contractId"] == incoming["contractId"] and withdrawn["accepted"] is False
    assert lines[6:] == ["0 cell(s)"]


def test_claude_code_hook_appends_turns_to_the_record(tmp_path: Path) -> None:
    hook = _block(r"```python\n(\"\"\"Append one Claude Code hook event.*?)```")
    (tmp_path / "saihm_hook.py").write_text(hook)
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        holder = holder_create(data)
        auth = f"Bearer {holder['token']}"
        env = {**os.environ, "SAIHM_ENDPOINT_URL": url, "SAIHM_AUTH_HEADER": auth}
        events = [
            ("said", {"hook_event_name": "UserPromptSubmit", "prompt": "What is the tea?"}),
            (
                "did",
                {
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": "ls"},
                    "tool_response": {},
                },
            ),
            ("end", {"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"}),
        ]
        for kind, event in events:
            done = subprocess.run(
                [sys.executable, str(tmp_path / "saihm_hook.py"), kind],
                input=json.dumps(event),
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0 and done.stderr == "", done.stderr
        with Client(url, auth) as client:
            got = [(c.kind, c.plaintext) for c in client.recall()]
    assert sorted(got) == [
        ("did", 'Assistant used Bash: {"command": "ls"}'),
        ("end", "session ended (prompt_input_exit)"),
        ("said", "User said: What is the tea?"),
    ]


@pytest.mark.anyio
async def test_mcp_local_server_example_runs_as_written(tmp_path: Path) -> None:
    """docs/mcp.md, "A local server, end to end": the printed config starts a working client."""
    blocks = re.findall(r"```sh mcp-local\n(.*?)```", (ROOT / "docs" / "mcp.md").read_text(), re.S)
    assert len(blocks) == 1
    (script,) = blocks
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    with serving(tmp_path, "--data", "./saihm-data") as (_, url):
        done = _run_as_written(script, url, tmp_path)
        assert done.returncode == 0, done.stderr
        server = json.loads(done.stdout)["mcpServers"]["saihm"]
        assert Path(server["command"]).is_absolute()
        # The recommended setup for a personal assistant works for 30 days (issue #25).
        token = server["env"]["SAIHM_AUTH_HEADER"].removeprefix("Bearer ")
        lasts = Capability.from_token(token).expires_at - time.time()
        assert lasts >= 30 * 86_400 - 60
        params = StdioServerParameters(
            command=server["command"], args=server["args"], env={**server["env"], "PATH": ""}
        )
        async with mcp.Client(params) as client:
            tools = await client.list_tools()
            status = await client.call_tool("saihm_status", {})
    assert sorted(t.name for t in tools.tools) == sorted(TOOL_NAMES)
    assert status.structured_content["status"] == "ok"
