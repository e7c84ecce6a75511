"""The ``saihm`` command line (DESIGN.md "Command line", pinned).

Every command works whether or not a server runs on the same data directory: LMDB is
multi-process, and each command reads state inside its own transaction. Bad input gets one
line on stderr and a non-zero exit; JSON goes to stdout where the design pins it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import os
import secrets
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from saihm import __version__
from saihm.config import Config, config_from
from saihm.errors import SaihmError
from saihm.helpformat import DefaultsFormatter

if TYPE_CHECKING:
    from saihm.events import CapabilityScope

EPILOG = """first steps:
  saihm serve --data ./saihm-data            run the operator on 127.0.0.1:8080
  saihm holder create --data ./saihm-data    make a holder; prints its token
  curl -s http://127.0.0.1:8080/ -H "Authorization: Bearer $TOKEN" \\
       -d '{"method":"saihm_status","params":{}}'
  saihm grant --data ./saihm-data --holder H --sessions all --ttl 604800
                                             a token that recalls across all sessions for a week
  saihm mcp-config --host claude-desktop     an MCP host config for saihm-mcp
"""


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (and exit 2), like every other error,
    and whose help states every option's default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _data(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, metavar="DIR", help="the data directory")
    parser.add_argument(
        "--kek-dir",
        metavar="DIR",
        help="KEK generations (default: DIR/../kek; keep it on another volume in production)",
    )
    parser.add_argument(
        "--authority-dir",
        metavar="DIR",
        help="the capability authority's key (default: DIR/../authority)",
    )
    parser.add_argument(
        "--log-keys-dir",
        metavar="DIR",
        help="the log's checkpoint signing keys (default: DIR/log-keys; keep them off the "
        "data volume in production)",
    )
    _store(parser)


def _store(parser: argparse.ArgumentParser) -> None:
    """``--store URL`` (DESIGN.md "Pinned additions for the second round")."""
    parser.add_argument(
        "--store",
        metavar="URL",
        help="keep the log and private state in this PostgreSQL database "
        "(postgresql://USER@HOST/DB; also $SAIHM_STORE); DIR then holds only node-local "
        "files and may be shared by the nodes of one log (default: LMDB in DIR/lmdb; "
        "docs/scaling.md)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every pinned command."""
    parser = Parser(
        prog="saihm",
        description="A custodial SAIHM operator for AI-agent memory with a public Merkle log.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"saihm {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser(
        "serve", help="run the operator (creates data, KEK, authority and log keys on first run)"
    )
    _data(serve)
    serve.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="listen port (default 8080)")
    serve.add_argument("--workers", type=int, default=1, help="processes sharing the port")
    serve.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate")
    serve.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    serve.add_argument(
        "--max-body",
        type=int,
        default=1 << 20,
        metavar="BYTES",
        help="largest accepted request body (default 1 MiB)",
    )
    _serve_policy(serve)
    serve.add_argument(
        "--rate-limit",
        type=float,
        metavar="PER_SECOND",
        help="calls per second each token may make, per worker (default 50; 0 disables)",
    )
    serve.add_argument(
        "--rate-burst",
        type=int,
        metavar="CALLS",
        help="calls a token may make at once before the rate applies (default 200)",
    )
    serve.add_argument(
        "--pending-max",
        type=int,
        metavar="N",
        help="pending memory proposals held per consumer (default 100)",
    )
    serve.add_argument(
        "--pending-ttl",
        type=int,
        metavar="SECONDS",
        help="lifetime of a pending memory proposal (default 604800, 7 days)",
    )
    serve.add_argument(
        "--origin",
        help="the log's identity, fixed when DIR is created (default: "
        "saihm.localhost/log/<8 hex of the log key hash>; see docs/formats.md)",
    )
    serve.add_argument(
        "--witness",
        dest="witnesses",
        action="append",
        type=_witness_option,
        metavar="URL=VKEY",
        help="submit each new checkpoint to this tlog-witness (submission URL and its "
        "verifier key; repeatable; default: none)",
    )
    serve.add_argument(
        "--map-size",
        type=int,
        metavar="BYTES",
        help="initial LMDB map size, at least 1 MiB (default 8 GiB); it doubles as needed",
    )
    serve.add_argument(
        "--map-size-max",
        type=int,
        metavar="BYTES",
        help="ceiling of the LMDB map; beyond it writes are refused with 503 (default 256 GiB)",
    )
    serve.add_argument(
        "--min-free-disk",
        type=int,
        metavar="BYTES",
        help="free bytes the data volume keeps; below it writes are refused with 503 "
        "(default 256 MiB; 0 disables)",
    )
    serve.add_argument(
        "--recall-cache-mb",
        type=int,
        default=None,
        metavar="MB",
        help="memory bound of the cache of verified cells, per process (default 256; 0 = off)",
    )
    serve.add_argument(
        "--embedding-model",
        metavar="DIR",
        type=Path,
        help="a local sentence-embedding model folder (tokenizer.json, onnx/model.onnx) for "
        "semantic ranking (needs saihm[semantic])",
    )
    serve.set_defaults(handler=_delegate("saihm.http.serve", "main"))

    holder = commands.add_parser("holder", help="holders").add_subparsers(dest="sub", required=True)
    create = holder.add_parser("create", help="create a holder; prints holderId, token, sessionId")
    _data(create)
    create.add_argument("--ttl", type=int, help=_TOKEN_TTL_HELP)
    create.set_defaults(handler=_cmd_holder_create)

    session = commands.add_parser("session", help="sessions").add_subparsers(
        dest="sub", required=True
    )
    opened = session.add_parser("open", help="open a new session for a holder; prints a token")
    _data(opened)
    opened.add_argument("--holder", required=True, help="holderId (64 hex)")
    opened.add_argument("--ttl", type=int, help=_TOKEN_TTL_HELP)
    opened.set_defaults(handler=_cmd_session_open)
    renew = session.add_parser(
        "renew", help="a fresh token for the same session (same memory); prints a token"
    )
    _data(renew)
    renew.add_argument("--holder", required=True, help="holderId (64 hex)")
    renew.add_argument("--session", required=True, help="sessionId (64 hex) to keep")
    renew.add_argument("--ttl", type=int, help=_TOKEN_TTL_HELP)
    renew.set_defaults(handler=_cmd_session_renew)
    revoke = session.add_parser(
        "revoke",
        help="revoke a session's tokens (logged as UNGRANT; docs/formats.md)",
        description="Revoke every token of the holder that carries ID: a sessionId (64 hex) "
        "revokes every token of that session, a tokenId (32 hex) one token. Logged as UNGRANT.",
    )
    _data(revoke)
    revoke.add_argument("--holder", required=True, help="holderId (64 hex)")
    revoke.add_argument(
        "id", metavar="SESSIONID|TOKENID", help="64-hex sessionId or 32-hex tokenId"
    )
    revoke.set_defaults(handler=_cmd_session_revoke)

    grant = commands.add_parser(
        "grant",
        help="a person's wider grant (logged as GRANT): let an agent recall across all its "
        "sessions for --ttl seconds; 'grant revoke GRANTID' withdraws it",
        usage="saihm grant --data DIR --holder H --sessions all [--namespaces a,b] "
        "[--ttl SECONDS]\n       saihm grant revoke --data DIR GRANTID",
    )
    _data(grant)
    grant.add_argument("--holder", required=True, help="holderId (64 hex)")
    grant.add_argument(
        "--sessions", required=True, choices=["all"], help="the sessions the grant covers"
    )
    grant.add_argument("--namespaces", help="comma-separated namespaces (default: all)")
    grant.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds (default 3600)")
    grant.set_defaults(handler=_cmd_grant)

    kek = commands.add_parser("kek", help="key-encryption keys").add_subparsers(
        dest="sub", required=True
    )
    rotate = kek.add_parser(
        "rotate", help="re-wrap every live DEK and seed under a new KEK, then destroy the old KEK"
    )
    _data(rotate)
    rotate.set_defaults(handler=_cmd_kek_rotate)

    rebuild = commands.add_parser(
        "rebuild",
        help="rebuild every projection from the log and prove it byte-identical; with "
        "--replace, repair the projections from the log",
    )
    _data(rebuild)
    rebuild.add_argument(
        "--replace",
        action="store_true",
        help="replace the live projections with the rebuild, atomically: one write "
        "transaction (a running server's writes wait for it)",
    )
    rebuild.set_defaults(handler=_cmd_rebuild)

    backup = commands.add_parser(
        "backup",
        help="a consistent, compacted copy of the data directory without keys (safe while serving)",
        description="Copy the data directory to DEST (which must not exist): LMDB from one "
        "read snapshot, compacted, plus the other files of the data directory; never key "
        "material, wherever it lies in the data directory and whatever --kek-dir, "
        "--authority-dir or --log-keys-dir say: KEK generations, the memo key, the rotation "
        "state and the authority seed are always left out, the log's signing keys unless "
        "--include-log-keys; each one left out is named on stderr. "
        "Restore: docs/operations.md 'Backups and restore'.",
    )
    _data(backup)
    backup.add_argument(
        "--include-log-keys",
        action="store_true",
        help="also copy the log's private checkpoint signing keys found in the data directory "
        "(default: left out, like every other key)",
    )
    backup.add_argument("dest", metavar="DEST", help="the new backup directory")
    backup.set_defaults(handler=_cmd_backup)

    migrate = commands.add_parser(
        "migrate",
        help="copy an LMDB data directory's log and private state to an empty PostgreSQL store",
        description="Copy every namespace of DIR's LMDB store (the log, the keyring, the "
        "projections) into the empty PostgreSQL database URL, in one write transaction, "
        "checked against the source before it commits; DIR's own write lock is held "
        "throughout, so the copy is of one moment. A migrate that fails or is killed leaves "
        "the target empty. The KEK "
        "directory, log keys and authority key stay in DIR; serve it afterwards with "
        "'saihm serve --data DIR --store URL'. Stop the server on DIR first.",
    )
    migrate.add_argument(
        "--from", dest="data", required=True, metavar="DIR", help="the LMDB data directory"
    )
    migrate.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="URL",
        help="an empty PostgreSQL database (postgresql://...)",
    )
    migrate.add_argument("--no-progress", action="store_true", help="no progress bar")
    migrate.set_defaults(handler=_delegate("saihm.migrate", "main"), store=None)

    from saihm.hostcli import add_commands as add_host_commands

    add_host_commands(commands)

    for name, text in DELEGATED_HELP.items():
        sub = commands.add_parser(name, help=text, add_help=False)
        sub.add_argument("rest", nargs=argparse.REMAINDER)
        sub.set_defaults(handler=DELEGATED[name])

    bench = commands.add_parser(
        "bench",
        help="measure speed against peers and floors in one run (JSON lines)",
        description="Print one JSON object per figure, with the peer figure and the ratio.",
    )
    bench.add_argument(
        "name", nargs="?", choices=_bench_names(), help="one benchmark (default all)"
    )
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the benchmark")
    bench.set_defaults(handler=_cmd_bench)
    return parser


_TOKEN_TTL_HELP = (
    f"token lifetime in seconds (default {Config.token_ttl}, {Config.token_ttl // 86_400} days)"
)


def _policy_default(name: str) -> object:
    """The default of a Config policy field: the dataclass is the one place it is written."""
    (field,) = [f for f in dataclasses.fields(Config) if f.name == name]
    return field.default


def _serve_policy(serve: argparse.ArgumentParser) -> None:
    """The config file and the operator's published policy (saihm.config.Config fields)."""
    serve.add_argument(
        "--config",
        metavar="FILE",
        help="TOML file of serve options, keyed by the long option without '--' "
        "(also $SAIHM_CONFIG); every option is also $SAIHM_<OPTION>, e.g. SAIHM_TLS_CERT; "
        "command line > environment > file > default (docs/operations.md)",
    )
    onoff = argparse.BooleanOptionalAction
    for option, text in (
        ("--governance", "offer the governance tools"),
        ("--recall-receipts", "log a RECALL receipt per recall"),
        ("--status-receipts", "log a STATUS receipt per status"),
    ):
        default = _policy_default(option[2:].replace("-", "_"))
        serve.add_argument(option, action=onoff, default=default, help=text)
    serve.add_argument(
        "--checkpoint-interval",
        type=float,
        default=_policy_default("checkpoint_interval"),
        metavar="SECONDS",
        help="seconds between signed checkpoints while the log grows",
    )
    serve.add_argument(
        "--kek-rotation-hours",
        type=int,
        default=_policy_default("kek_rotation_hours"),
        metavar="HOURS",
        help="hours between KEK retirements (0: no schedule; governable)",
    )
    serve.add_argument(
        "--voting-window",
        type=int,
        default=_policy_default("voting_window"),
        metavar="SECONDS",
        help="how long a governance proposal stays open",
    )
    serve.add_argument(
        "--temporary-default-ttl",
        type=int,
        default=_policy_default("temporary_default_ttl"),
        metavar="SECONDS",
        help="TEMPORARY contract lifetime when none is given (governable)",
    )
    serve.add_argument(
        "--service-window-ms",
        type=int,
        default=_policy_default("service_window_ms"),
        metavar="MS",
        help="a call answered within this many ms counts as served in time (status prs)",
    )


def _witness_option(text: str) -> str:
    """``--witness URL=VKEY``, checked (saihm.witness.submit.parse_witness) and normalised."""
    from saihm.witness.submit import parse_witness

    try:
        return parse_witness(text).spec
    except SaihmError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _delegate(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        return importlib.import_module(module).__dict__[function](args)

    return handler


DELEGATED_HELP = {
    "export": "write a self-contained audit bundle (no plaintext, no keys)",
    "verify": "verify a bundle, mirror, live log or data directory without trusting the operator",
    "monitor": "keep a verified mirror of a log and report rollbacks and forks",
    "replay": "rebuild the public projections of a bundle for research",
    "mirror": "copy a tiled log into a directory, verifying everything (incremental)",
    "publish": "write the log as static tlog-tiles files for any web server or CDN",
    "memory": "RFC 0007 memory provider (local-vault): init, grant, query, pending, ...",
    "witness": "run a C2SP tlog-witness: 'saihm witness serve --state DIR --log VKEY'",
}


def _cmd_verify(args: argparse.Namespace) -> int:
    from saihm.audit.cli import verify
    from saihm.fsck import private_check

    return verify(args, private=private_check)


DELEGATED = {
    **{
        name: _delegate("saihm.audit.cli", name)
        for name in ("export", "monitor", "replay", "mirror")
    },
    "verify": _cmd_verify,
    "publish": _delegate("saihm.publishcmd", "main"),
    "memory": _delegate("saihm.provider.cli", "main"),
    "witness": _delegate("saihm.witness.server", "main"),
}


def _bench_names() -> tuple[str, ...]:
    from saihm.bench import NAMES

    return NAMES


def existing_data(args: argparse.Namespace) -> None:
    """Refuse a --data directory that does not exist: only ``serve`` creates one, so a typo
    cannot make a new store whose tokens the running server rejects."""
    from pathlib import Path

    from saihm.errors import NotFound

    data = getattr(args, "data", None)
    if data is not None and not Path(data, "authority.pub").is_file():
        what = "does not exist" if not Path(data).exists() else "is not a saihm data directory"
        raise NotFound(f"data directory {data} {what} (saihm serve --data {data} creates one)")


def _print(obj: object) -> None:
    print(json.dumps(obj, indent=None), flush=True)


def _hex32(value: str | None, what: str) -> bytes:
    from saihm.protocol.params import id32

    return id32(value, what=what)


def _issue(
    args: argparse.Namespace, holder_id: bytes, session_id: bytes, scope: CapabilityScope
) -> tuple[str, dict[str, object], str]:
    """The token, its ``scope``/``expiresAt`` fields and the stderr line saying what it sees."""
    from saihm.authority import Authority
    from saihm.continuity import choose_ttl, token_fields, token_summary

    config = config_from(args)
    authority = Authority.open(config.authority_dir)
    ttl = choose_ttl(getattr(args, "ttl", None), config.token_ttl)
    now = int(time.time())
    cap = authority.issue(holder_id, session_id, scope, ttl, now=now)
    summary = token_summary(cap, str(config.data_dir), now=now, store=config.store)
    return cap.to_token(), token_fields(cap), summary


def _print_issued(obj: dict[str, object], summary: str) -> None:
    """The pinned JSON on stdout, then what the token sees on stderr (after the JSON, so a
    closed stdout stays a quiet exit)."""
    _print(obj)
    print(summary, file=sys.stderr, flush=True)


def _cmd_holder_create(args: argparse.Namespace) -> int:
    from saihm.compose import open_operator
    from saihm.events import CapabilityScope

    operator = open_operator(config_from(args), checkpointer=False)
    try:
        holder_id = operator.admin.create_holder()
    finally:
        operator.store.close()
    session_id = secrets.token_bytes(32)
    token, fields, summary = _issue(args, holder_id, session_id, CapabilityScope())
    _print_issued(
        {"holderId": holder_id.hex(), "token": token, "sessionId": session_id.hex(), **fields},
        summary,
    )
    return 0


def _cmd_session_open(args: argparse.Namespace) -> int:
    from saihm.compose import open_operator
    from saihm.errors import NotFound
    from saihm.events import CapabilityScope

    holder_id = _hex32(args.holder, "holder")
    operator = open_operator(config_from(args), checkpointer=False)
    try:
        with operator.store.read_txn() as txn:
            if not operator.store.projections.holders.known(txn, holder_id):
                raise NotFound("no such holder")
    finally:
        operator.store.close()
    session_id = secrets.token_bytes(32)
    token, fields, summary = _issue(args, holder_id, session_id, CapabilityScope())
    _print_issued({"sessionId": session_id.hex(), "token": token, **fields}, summary)
    return 0


def _cmd_session_renew(args: argparse.Namespace) -> int:
    """A new token for an existing session id: the agent keeps recalling that session.

    Refused, with nothing issued or logged, for an unknown holder and a revoked session
    (docs/formats.md "Session revocation"). Sessions are not logged when opened, so a session
    id that never wrote cannot be told from one never opened; renewing it gives the same
    capability ``saihm session open`` would, and the hint that ``holder create`` prints must
    work before the agent's first write.
    """
    from saihm.compose import open_operator
    from saihm.errors import Conflict, NotFound
    from saihm.events import CapabilityScope

    holder_id = _hex32(args.holder, "holder")
    session_id = _hex32(args.session, "session")
    operator = open_operator(config_from(args), checkpointer=False)
    store = operator.store
    try:
        with store.read_txn() as txn:
            if not store.projections.holders.known(txn, holder_id):
                raise NotFound("no such holder")
            if store.authenticator.revocations.revoked(txn, holder_id, session_id):
                raise Conflict("the session is revoked: open a new one with `saihm session open`")
    finally:
        store.close()
    token, fields, summary = _issue(args, holder_id, session_id, CapabilityScope())
    _print_issued({"sessionId": session_id.hex(), "token": token, **fields}, summary)
    return 0


def _cmd_session_revoke(args: argparse.Namespace) -> int:
    from saihm.compose import open_operator
    from saihm.errors import MalformedInput

    holder_id = _hex32(args.holder, "holder")
    try:
        revoked = bytes.fromhex(args.id)
    except ValueError as err:
        raise MalformedInput("the id must be hex") from err
    operator = open_operator(config_from(args), checkpointer=False)
    try:
        changed = operator.admin.revoke_session(holder_id, revoked)
    finally:
        operator.store.close()
    _print({"holderId": holder_id.hex(), "id": revoked.hex(), "revoked": True, "changed": changed})
    return 0


def build_grant_revoke_parser() -> argparse.ArgumentParser:
    """``saihm grant revoke --data DIR GRANTID`` (parsed on its own: the pinned form puts the
    grant id after the options, which a sub-subcommand of ``grant`` could not take)."""
    parser = Parser(prog="saihm grant revoke", description="Withdraw a grant (logged as UNGRANT).")
    _data(parser)
    parser.add_argument("grant_id", metavar="GRANTID", help="the grantId 'saihm grant' printed")
    parser.set_defaults(handler=_cmd_grant_revoke)
    return parser


def _cmd_grant_revoke(args: argparse.Namespace) -> int:
    from saihm.compose import open_operator

    grant_id = _hex32(args.grant_id, "grant id")
    operator = open_operator(config_from(args), checkpointer=False)
    try:
        changed = operator.admin.ungrant(grant_id)
    finally:
        operator.store.close()
    _print({"grantId": grant_id.hex(), "revoked": True, "changed": changed})
    return 0


def _cmd_grant(args: argparse.Namespace) -> int:
    from saihm.compose import open_operator
    from saihm.errors import MalformedInput
    from saihm.events import CapabilityScope

    if args.ttl <= 0:
        raise MalformedInput("--ttl must be positive")
    namespaces = None
    if args.namespaces:
        namespaces = [n for n in args.namespaces.split(",") if n]
        if not namespaces:
            raise MalformedInput("--namespaces names no namespace")
    holder_id = _hex32(args.holder, "holder")
    expires_at = int(time.time()) + args.ttl
    _check_grant_token(holder_id, namespaces, expires_at)
    operator = open_operator(config_from(args), checkpointer=False)
    try:
        grant_id, _ = operator.admin.grant(holder_id, namespaces, expires_at)
    finally:
        operator.store.close()
    scope = CapabilityScope(
        sessions="all",
        namespaces=None if namespaces is None else tuple(namespaces),
        grant_id=grant_id,
    )
    token, fields, summary = _issue(args, holder_id, secrets.token_bytes(32), scope)
    _print_issued({"grantId": grant_id.hex(), "token": token, **fields}, summary)
    return 0


def _check_grant_token(holder_id: bytes, namespaces: list[str] | None, expires_at: int) -> None:
    """Refuse, before GRANT is logged, a grant whose token no server could read."""
    from saihm.authority import check_token_fits
    from saihm.errors import MalformedInput
    from saihm.events import CapabilityScope

    try:
        scope = CapabilityScope(
            sessions="all",
            namespaces=None if namespaces is None else tuple(namespaces),
            grant_id=bytes(32),
        )
    except ValueError as err:
        raise MalformedInput("--namespaces: each namespace is 1 to 256 characters") from err
    check_token_fits(holder_id, bytes(32), scope, expires_at)


def _cmd_kek_rotate(args: argparse.Namespace) -> int:
    from saihm.compose import open_operator

    operator = open_operator(config_from(args), checkpointer=False)
    try:
        version = operator.store.rotate_kek(wait=300)
    finally:
        operator.store.close()
    _print({"kekVersion": version})
    return 0


def _cmd_rebuild(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    from rich.progress import Progress

    from saihm.store import Store

    config = config_from(args)
    if not config.authority_public_key_file.exists():
        from saihm.errors import NotFound

        raise NotFound(f"{config.data_dir} is not a saihm data directory")
    # The applied-index check on open would refuse exactly the store this command repairs.
    store = Store(config, check_applied=False)
    try:
        total = store.size()
        with (
            tempfile.TemporaryDirectory(prefix="saihm-rebuild-") as tmp,
            Progress(disable=not sys.stderr.isatty(), transient=True) as bar,
        ):
            task = bar.add_task("rebuilding projections", total=total)
            target = Path(tmp) / "projections"

            def advance(n: int) -> None:
                bar.advance(task, n)

            report: Mapping[str, Any]
            if args.replace:
                report = store.replace_projections(target, progress=advance)
            else:
                report = store.rebuild_into(target, progress=advance)
    finally:
        store.close()
    rate = report["events"] / report["seconds"] if report["seconds"] else None
    _print({**report, "eventsPerSecond": rate})
    return 0 if report.get("identical", True) else 1


def _cmd_backup(args: argparse.Namespace) -> int:
    if args.store is not None:
        from saihm.errors import MalformedInput

        raise MalformedInput(
            "saihm backup copies an LMDB data directory; back a PostgreSQL store up with "
            "pg_dump or the database's continuous archiving (docs/operations.md)"
        )
    return _delegate("saihm.backup", "main")(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    for name in [args.name] if args.name else _bench_names():
        module = importlib.import_module(f"saihm.bench.{name}")
        for figure in module.run(args.rest):
            print(json.dumps(figure), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``saihm`` console script."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in DELEGATED:
            # Delegated commands parse their own options (so `saihm verify --help` is theirs).
            args = argparse.Namespace(command=argv[0], rest=argv[1:])
            args.handler = DELEGATED[argv[0]]
        elif argv[:2] == ["grant", "revoke"]:
            args = build_grant_revoke_parser().parse_args(argv[2:])
            args.command = "grant revoke"
        elif argv[:1] == ["serve"]:
            from saihm.settings import parse_with_settings

            args = parse_with_settings(subparser(parser, "serve"), argv[1:], os.environ)
            args.command = "serve"
        else:
            args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        store_option(args, os.environ)
        if args.command != "serve":
            existing_data(args)
        return args.handler(args)
    except SystemExit as done:
        # argparse's own exits (--help: 0, bad usage: 2) become return codes.
        return done.code if isinstance(done.code, int) else 2
    except SaihmError as err:
        from saihm.storehint import with_store
        from saihm.storeurl import scrub

        # A store URL may carry a password: no message shows it, whoever wrote the message.
        url = _store_url(argv)
        print(f"saihm: error: {with_store(scrub(str(err), url), url)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return quiet_broken_pipe()
    except ModuleNotFoundError as err:
        hint = missing_extra(err)
        if hint is None:
            raise
        print(f"saihm: error: {hint}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"saihm: error: {os_error_text(err)}", file=sys.stderr)
        return 2
    except Exception as err:
        # A bug, not bad input: say so in one line; SAIHM_DEBUG=1 shows the traceback.
        if os.environ.get("SAIHM_DEBUG"):
            raise
        print(
            f"saihm: internal error ({type(err).__name__}); rerun with SAIHM_DEBUG=1",
            file=sys.stderr,
        )
        return 70


def store_option(args: argparse.Namespace, environ: os._Environ[str] | dict[str, str]) -> None:
    """Settle ``args.store`` for a command that has ``--store``: the option, else
    ``$SAIHM_STORE`` (``serve`` reads it, and its config file, through saihm.settings), then
    check its form (saihm.storeurl); a bad URL is one line that never shows its password."""
    if not hasattr(args, "store"):
        return
    from saihm.storeurl import ENV, check_store_url

    if args.store is None and environ.get(ENV) and args.command != "migrate":
        args.store = environ[ENV]
    if args.store is not None:
        check_store_url(args.store)


def _store_url(argv: list[str]) -> str | None:
    """The store URL a command line names (``--store`` or ``--to``) or $SAIHM_STORE."""
    from saihm.storeurl import ENV

    for i, arg in enumerate(argv):
        for option in ("--store", "--to"):
            if arg == option and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(option + "="):
                return arg.split("=", 1)[1]
    return os.environ.get(ENV)


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of the subcommand ``name``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)


#: The optional extras, by the top-level module each one installs.
EXTRAS = {"pqcrypto": "audit", "pymerkle": "bench"}


def missing_extra(err: ModuleNotFoundError) -> str | None:
    """A one-line install hint when ``err`` is a module of an optional extra, else None."""
    top = (err.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"this needs the optional {top} package: pip install 'saihm[{extra}]'"


def os_error_text(err: OSError) -> str:
    """One line for an OS error: what failed and on which file, without ``[Errno N]``."""
    from saihm.errors import os_message

    return os_message(err)


def quiet_broken_pipe() -> int:
    """The reader of our stdout went away (``saihm ... | head``): stop quietly, exit 141 as a
    shell does for SIGPIPE, and keep Python from complaining while it flushes stdout."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 141


if __name__ == "__main__":
    sys.exit(main())
