"""The operator's own commands on a data directory: ``holder``, ``session``, ``grant``,
``kek`` and ``rebuild`` (DESIGN.md "Command line")."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from saihm.commands.common import Parser, config_from, data_options, emit, hex32, settled
from saihm.config import Config

if TYPE_CHECKING:
    from saihm.authority import Authority
    from saihm.events import CapabilityScope

__all__ = ["build_grant_revoke_parser", "register"]

_TOKEN_TTL_HELP = (
    f"token lifetime in seconds (default {Config.token_ttl}, {Config.token_ttl // 86_400} days)"
)


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``holder``, ``session``, ``grant`` (and ``grant revoke``), ``kek`` and ``rebuild``."""
    holder = commands.add_parser("holder", help="holders").add_subparsers(dest="sub", required=True)
    create = holder.add_parser("create", help="create a holder; prints holderId, token, sessionId")
    data_options(create)
    create.add_argument("--ttl", type=int, help=_TOKEN_TTL_HELP)
    create.set_defaults(run=_holder_create)

    session = commands.add_parser("session", help="sessions").add_subparsers(
        dest="sub", required=True
    )
    opened = session.add_parser("open", help="open a new session for a holder; prints a token")
    data_options(opened)
    opened.add_argument("--holder", required=True, help="holderId (64 hex)")
    opened.add_argument("--ttl", type=int, help=_TOKEN_TTL_HELP)
    opened.set_defaults(run=_session_open)
    renew = session.add_parser(
        "renew", help="a fresh token for the same session (same memory); prints a token"
    )
    data_options(renew)
    renew.add_argument("--holder", required=True, help="holderId (64 hex)")
    renew.add_argument("--session", required=True, help="sessionId (64 hex) to keep")
    renew.add_argument("--ttl", type=int, help=_TOKEN_TTL_HELP)
    renew.set_defaults(run=_session_renew)
    revoke = session.add_parser(
        "revoke",
        help="revoke a session's tokens (logged as UNGRANT; docs/formats.md)",
        description="Revoke every token of the holder that carries ID: a sessionId (64 hex) "
        "revokes every token of that session, a tokenId (32 hex) one token. Logged as UNGRANT.",
    )
    data_options(revoke)
    revoke.add_argument("--holder", required=True, help="holderId (64 hex)")
    revoke.add_argument(
        "id", metavar="SESSIONID|TOKENID", help="64-hex sessionId or 32-hex tokenId"
    )
    revoke.set_defaults(run=_session_revoke)

    grant = commands.add_parser(
        "grant",
        help="a person's wider grant (logged as GRANT): let an agent recall across all its "
        "sessions for --ttl seconds; 'grant revoke GRANTID' withdraws it",
        usage="saihm grant --data DIR --holder H --sessions all [--namespaces a,b] "
        "[--ttl SECONDS]\n       saihm grant revoke --data DIR GRANTID",
        # The pinned form puts the grant id after the options, which a sub-subcommand of
        # ``grant`` (whose own options are required) could not take: its own parser.
        routes={"revoke": build_grant_revoke_parser()},
    )
    data_options(grant)
    grant.add_argument("--holder", required=True, help="holderId (64 hex)")
    grant.add_argument(
        "--sessions", required=True, choices=["all"], help="the sessions the grant covers"
    )
    grant.add_argument("--namespaces", help="comma-separated namespaces (default: all)")
    grant.add_argument(
        "--ttl",
        type=int,
        default=Config.token_ttl,
        help=f"lifetime in seconds (default {Config.token_ttl}, {Config.token_ttl // 86_400} days, "
        "as long as a session token)",
    )
    grant.set_defaults(run=_grant)

    kek = commands.add_parser("kek", help="key-encryption keys").add_subparsers(
        dest="sub", required=True
    )
    rotate = kek.add_parser(
        "rotate", help="re-wrap every live DEK and seed under a new KEK, then destroy the old KEK"
    )
    data_options(rotate)
    rotate.set_defaults(run=_kek_rotate)

    rebuild = commands.add_parser(
        "rebuild",
        help="rebuild every projection from the log and prove it byte-identical; with "
        "--replace, repair the projections from the log",
    )
    data_options(rebuild)
    rebuild.add_argument(
        "--replace",
        action="store_true",
        help="replace the live projections with the rebuild, atomically: one write "
        "transaction (a running server's writes wait for it)",
    )
    rebuild.set_defaults(run=_rebuild)


def build_grant_revoke_parser() -> argparse.ArgumentParser:
    """``saihm grant revoke --data DIR GRANTID``."""
    parser = Parser(prog="saihm grant revoke", description="Withdraw a grant (logged as UNGRANT).")
    data_options(parser)
    parser.add_argument("grant_id", metavar="GRANTID", help="the grantId 'saihm grant' printed")
    parser.set_defaults(run=_grant_revoke)
    return parser


def _authority(args: argparse.Namespace) -> Authority:
    """The authority whose key is in ``--authority-dir``."""
    from saihm.authority import Authority

    return Authority.open(config_from(args).authority_dir)


def _issue(
    args: argparse.Namespace, holder_id: bytes, session_id: bytes | None, scope: CapabilityScope
) -> tuple[bytes, str, dict[str, object], str]:
    """The sessionId (a new one the authority mints when ``session_id`` is None), the token,
    its ``scope``/``expiresAt`` fields and the stderr line saying what it sees."""
    from saihm.authority.continuity import choose_ttl, token_fields, token_summary

    config = config_from(args)
    authority = _authority(args)
    if session_id is None:
        session_id = authority.session_id(holder_id)
    ttl = choose_ttl(getattr(args, "ttl", None), config.token_ttl)
    now = int(time.time())
    cap = authority.issue(holder_id, session_id, scope, ttl, now=now)
    summary = token_summary(cap, str(config.data_dir), now=now, store=config.store)
    return session_id, cap.to_token(), token_fields(cap), summary


def _print_issued(obj: dict[str, object], summary: str) -> None:
    """The pinned JSON on stdout, then what the token sees on stderr (after the JSON, so a
    closed stdout stays a quiet exit)."""
    emit(obj)
    print(summary, file=sys.stderr, flush=True)


@settled
def _holder_create(args: argparse.Namespace) -> int:
    from saihm.compose import open_operator
    from saihm.events import CapabilityScope

    operator = open_operator(config_from(args), checkpointer=False)
    try:
        holder_id = operator.admin.create_holder()
    finally:
        operator.store.close()
    session_id, token, fields, summary = _issue(args, holder_id, None, CapabilityScope())
    _print_issued(
        {"holderId": holder_id.hex(), "token": token, "sessionId": session_id.hex(), **fields},
        summary,
    )
    return 0


@settled
def _session_open(args: argparse.Namespace) -> int:
    from saihm.authority.actions import check_holder
    from saihm.compose import open_operator
    from saihm.events import CapabilityScope

    holder_id = hex32(args.holder, "holder")
    operator = open_operator(config_from(args), checkpointer=False)
    try:
        check_holder(operator.store, holder_id)
    finally:
        operator.store.close()
    session_id, token, fields, summary = _issue(args, holder_id, None, CapabilityScope())
    _print_issued({"sessionId": session_id.hex(), "token": token, **fields}, summary)
    return 0


@settled
def _session_renew(args: argparse.Namespace) -> int:
    """A new token for an existing session id: the agent keeps recalling that session.

    Refused, with nothing issued or logged, for an unknown holder, a session that is not the
    holder's and a revoked session (docs/formats.md "Session revocation";
    saihm.authority.actions.check_renewable).
    """
    from saihm.authority.actions import check_renewable
    from saihm.compose import open_operator
    from saihm.events import CapabilityScope

    holder_id = hex32(args.holder, "holder")
    session_id = hex32(args.session, "session")
    authority = _authority(args)
    operator = open_operator(config_from(args), checkpointer=False)
    try:
        check_renewable(operator.store, authority, holder_id, session_id)
    finally:
        operator.store.close()
    _, token, fields, summary = _issue(args, holder_id, session_id, CapabilityScope())
    _print_issued({"sessionId": session_id.hex(), "token": token, **fields}, summary)
    return 0


@settled
def _session_revoke(args: argparse.Namespace) -> int:
    """Refused, with nothing logged, for an id that is not the holder's
    (saihm.authority.actions.check_revocable)."""
    from saihm.authority.actions import check_revocable
    from saihm.compose import open_operator
    from saihm.errors import MalformedInput

    holder_id = hex32(args.holder, "holder")
    try:
        revoked = bytes.fromhex(args.id)
    except ValueError as err:
        raise MalformedInput("the id must be hex") from err
    authority = _authority(args)
    operator = open_operator(config_from(args), checkpointer=False)
    try:
        check_revocable(operator.store, authority, holder_id, revoked)
        changed = operator.admin.revoke_session(holder_id, revoked)
    finally:
        operator.store.close()
    emit({"holderId": holder_id.hex(), "id": revoked.hex(), "revoked": True, "changed": changed})
    return 0


@settled
def _grant_revoke(args: argparse.Namespace) -> int:
    from saihm.compose import open_operator

    grant_id = hex32(args.grant_id, "grant id")
    operator = open_operator(config_from(args), checkpointer=False)
    try:
        changed = operator.admin.ungrant(grant_id)
    finally:
        operator.store.close()
    emit({"grantId": grant_id.hex(), "revoked": True, "changed": changed})
    return 0


@settled
def _grant(args: argparse.Namespace) -> int:
    from saihm.authority.actions import check_grant_token, grant_scope
    from saihm.compose import open_operator
    from saihm.errors import MalformedInput

    if args.ttl <= 0:
        raise MalformedInput("--ttl must be positive")
    namespaces = None
    if args.namespaces:
        namespaces = [n for n in args.namespaces.split(",") if n]
        if not namespaces:
            raise MalformedInput("--namespaces names no namespace")
    holder_id = hex32(args.holder, "holder")
    expires_at = int(time.time()) + args.ttl
    check_grant_token(holder_id, namespaces, expires_at)
    operator = open_operator(config_from(args), checkpointer=False)
    try:
        grant_id, _ = operator.admin.grant(holder_id, namespaces, expires_at)
    finally:
        operator.store.close()
    scope = grant_scope(namespaces, grant_id)
    _, token, fields, summary = _issue(args, holder_id, None, scope)
    _print_issued({"grantId": grant_id.hex(), "token": token, **fields}, summary)
    return 0


@settled
def _kek_rotate(args: argparse.Namespace) -> int:
    from saihm.compose import open_operator

    operator = open_operator(config_from(args), checkpointer=False)
    try:
        version = operator.store.rotate_kek(wait=300)
    finally:
        operator.store.close()
    emit({"kekVersion": version})
    return 0


@settled
def _rebuild(args: argparse.Namespace) -> int:
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
    emit({**report, "eventsPerSecond": rate})
    return 0 if report.get("identical", True) else 1
