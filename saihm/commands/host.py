"""Host-side commands: clients of a running operator, configured like ``saihm-mcp``.

DESIGN.md "Pinned additions": ``saihm record [--kind said|did|end] TEXT``, ``saihm contract
list``, ``saihm contract accept|decline|withdraw CONTRACTID`` and ``saihm mcp-config
[--host claude-desktop|claude-code|cursor]``. The first two read ``SAIHM_ENDPOINT_URL`` and
``SAIHM_AUTH_HEADER`` (and ``SAIHM_TIMEOUT_SECONDS``, ``SAIHM_CA_FILE``,
``SAIHM_TLS_PIN_SHA256``) and talk through :mod:`saihm.client`; they never open a data
directory and never print the credential. Results are JSON on stdout; a failure is one line
on stderr with exit 2 (nothing done) or 3 (the operator may or may not have acted).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from saihm.errors import CommandError, MalformedInput

if TYPE_CHECKING:
    from saihm.client import Client, ClientError

# The client library (aiohttp, pydantic) is imported by the commands that use it, so that
# building the ``saihm`` parser stays cheap for every other command.

__all__ = ["mcp_server_command", "register"]

HOSTS = ("claude-desktop", "claude-code", "cursor")
DEFAULT_ENDPOINT = "http://127.0.0.1:8080/"
_PLACEHOLDER = "Bearer <token printed by saihm holder create, session open or grant>"
_ENV_HELP = (
    'configured like saihm-mcp: SAIHM_ENDPOINT_URL, SAIHM_AUTH_HEADER ("Bearer <token>"), '
    "optionally SAIHM_TIMEOUT_SECONDS, SAIHM_CA_FILE, SAIHM_TLS_PIN_SHA256"
)


def register(commands: argparse._SubParsersAction) -> None:
    """Register ``record``, ``contract`` and ``mcp-config`` on the ``saihm`` parser."""
    record = commands.add_parser(
        "record",
        help="append what the agent said or did to its session's record (host side)",
        description="Append one entry to the session's record of what the agent said and did. "
        "Entries are chained and can never be altered; recall returns them with memory, marked "
        f"by kind. {_ENV_HELP}.",
    )
    record.add_argument(
        "--kind",
        choices=["said", "did", "end"],
        default="said",
        help="said (default): words; did: an action; end: close the session's record",
    )
    record.add_argument("text", metavar="TEXT", help="the entry; '-' reads it from stdin")
    record.set_defaults(run=_cmd_record)

    contract = commands.add_parser(
        "contract",
        help="sharing contracts as the grantee sees them: list, accept, decline, withdraw",
        description=f"The grantee's side of sharing, with the grantee's own token. {_ENV_HELP}.",
    ).add_subparsers(dest="sub", required=True)
    listed = contract.add_parser("list", help="contracts naming you as grantee, and your own")
    listed.set_defaults(run=_cmd_contract_list)
    for verb, text in (
        ("accept", "accept a contract: its cells appear in your recall, marked shared"),
        ("decline", "decline a contract (also withdraws an earlier acceptance)"),
        ("withdraw", "withdraw an acceptance you gave (refused if not accepted)"),
    ):
        sub = contract.add_parser(verb, help=text)
        sub.add_argument("contract_id", metavar="CONTRACTID")
        sub.set_defaults(run=_cmd_contract_answer, verb=verb)

    config = commands.add_parser(
        "mcp-config",
        help="print a JSON MCP host config for saihm-mcp with absolute paths for this install",
    )
    config.add_argument("--host", choices=HOSTS, default="claude-desktop")
    config.add_argument(
        "--endpoint",
        help=f"operator URL (default: $SAIHM_ENDPOINT_URL, else {DEFAULT_ENDPOINT})",
    )
    config.add_argument("--name", default="saihm", help="the server's name in the host")
    config.set_defaults(run=_cmd_mcp_config)


# -- talking to the operator ---------------------------------------------------------------


def _client() -> Client:
    from saihm.client import Client

    return Client.from_env(os.environ)


def _fail(err: ClientError) -> NoReturn:
    """Raise the one line the printer shows (what happened, the operator's code, the advice
    for 401/403); exit 3 when the outcome is unknown, else 2."""
    line = str(err)
    if err.operator_code and err.operator_code not in line:
        line += f" (error code: {err.operator_code})"
    if err.advice:
        line += f"; {err.advice}"
    exit_code = 3 if err.outcome == "unknown" else 2
    raise CommandError(line.replace("\n", " "), exit_code=exit_code) from err


def _emit(obj: object) -> int:
    print(json.dumps(obj), flush=True)
    return 0


def _stdin_text() -> str:
    """Standard input as UTF-8 text; anything else is refused (nothing is recorded)."""
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as err:
        raise MalformedInput("standard input is not UTF-8 text; nothing recorded") from err


def _cmd_record(args: argparse.Namespace) -> int:
    from saihm.client import ClientError

    text = _stdin_text() if args.text == "-" else args.text
    try:
        with _client() as client:
            recorded = client.record(args.kind, text)
    except ClientError as err:
        return _fail(err)
    return _emit(recorded.model_dump(by_alias=True, exclude_none=True))


def _cmd_contract_list(args: argparse.Namespace) -> int:
    from saihm.client import ClientError

    try:
        with _client() as client:
            status = client.status()
    except ClientError as err:
        return _fail(err)
    incoming = [c.model_dump(by_alias=True) for c in status.incoming_contracts or []]
    own = [c.model_dump(by_alias=True) for c in status.contracts or []]
    return _emit({"holderId": status.agent_id_hash_hex, "incoming": incoming, "own": own})


def _cmd_contract_answer(args: argparse.Namespace) -> int:
    from saihm.client import ClientError

    try:
        with _client() as client:
            if args.verb == "withdraw":
                incoming = {c.contract_id: c for c in client.status().incoming_contracts or []}
                known = incoming.get(args.contract_id.lower())
                if known is None or not known.accepted:
                    raise ClientError(
                        "refused: this contract is not one you have accepted "
                        "(see saihm contract list)",
                        kind="refused",
                    )
            if args.verb == "accept":
                answer = client.accept_contract(args.contract_id)
            else:
                answer = client.decline_contract(args.contract_id)
    except ClientError as err:
        return _fail(err)
    return _emit(answer.model_dump(by_alias=True, exclude_none=True))


# -- host configuration --------------------------------------------------------------------


def mcp_server_command() -> list[str]:
    """The absolute command that starts ``saihm-mcp`` of this install.

    The console script beside the running interpreter (the venv's ``bin``), else the one on
    PATH, else this interpreter with ``-m saihm.mcp``; never a bare name a host's PATH may lack.
    """
    beside = Path(sys.executable).absolute().parent / "saihm-mcp"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("saihm-mcp")
    if found:
        return [str(Path(found).absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "saihm.mcp"]


def _cmd_mcp_config(args: argparse.Namespace) -> int:
    from saihm.client import ClientError
    from saihm.client._endpoint import validate_endpoint

    endpoint = args.endpoint or os.environ.get("SAIHM_ENDPOINT_URL") or DEFAULT_ENDPOINT
    try:
        endpoint = validate_endpoint(endpoint, "the endpoint", "SAIHM_AUTH_HEADER")
    except ClientError as err:
        raise MalformedInput(str(err)) from err
    command, *rest = mcp_server_command()
    env: dict[str, str] = {"SAIHM_ENDPOINT_URL": endpoint}
    auth = os.environ.get("SAIHM_AUTH_HEADER")
    if args.host == "claude-code":
        # Claude Code expands ${VAR} in .mcp.json: the credential stays in the environment.
        env["SAIHM_AUTH_HEADER"] = "${SAIHM_AUTH_HEADER}"
        note = (
            "save as .mcp.json in the project (or pass to `claude mcp add-json`); Claude Code "
            "takes SAIHM_AUTH_HEADER from its own environment"
        )
    elif auth:
        env["SAIHM_AUTH_HEADER"] = auth
        note = "the config holds the credential from SAIHM_AUTH_HEADER: keep the file private"
    else:
        env["SAIHM_AUTH_HEADER"] = _PLACEHOLDER
        note = "replace the SAIHM_AUTH_HEADER placeholder (or set it and run this again)"
    for name in ("SAIHM_TIMEOUT_SECONDS", "SAIHM_TLS_PIN_SHA256"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    if os.environ.get("SAIHM_CA_FILE"):
        env["SAIHM_CA_FILE"] = str(Path(os.environ["SAIHM_CA_FILE"]).absolute())
    server: dict[str, object] = {"command": command, "args": rest, "env": env}
    if args.host == "claude-code":
        server = {"type": "stdio", **server}
    where = {
        "claude-desktop": "claude_desktop_config.json",
        "claude-code": ".mcp.json",
        "cursor": "~/.cursor/mcp.json or .cursor/mcp.json",
    }[args.host]
    print(f"saihm: for {where}; {note}", file=sys.stderr, flush=True)
    return _emit({"mcpServers": {args.name: server}})
