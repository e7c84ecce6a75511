"""``saihm memory ...``: the local-vault from the command line (RFC 0007 "Migration", issue #8).

JSON goes to stdout;
bad input gets one line on stderr and exit code 2. Tokens are read from ``--consumer-token``
(``-`` reads it from stdin, keeping it out of the process list) and never printed back, except
the new consumer token that ``grant`` exists to hand out.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable

from saihm.commands.common import Parser
from saihm.config import Config
from saihm.errors import MalformedInput, NotFound, SaihmError

# The provider (pydantic, the store) is imported by the actions that use it, so that building
# the ``saihm`` parser stays cheap for every other command.

EPILOG = """example:
  saihm memory init --data ./saihm-data
  saihm memory store --data ./saihm-data --namespace preferences --json '{"fact":"tabs"}'
  saihm memory grant cursor --data ./saihm-data --memory preferences,projects
  saihm memory query --data ./saihm-data --consumer-token - --namespaces preferences < token
  saihm memory forget --data ./saihm-data RECORD_ID
  SAIHM_ENDPOINT_URL=http://127.0.0.1:8080/ SAIHM_AUTH_HEADER="Bearer $TOKEN" saihm memory mcp
"""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, metavar="DIR", help="the data directory")
    parser.add_argument("--kek-dir", metavar="DIR", help="KEK generations (default DIR/../kek)")
    parser.add_argument(
        "--authority-dir", metavar="DIR", help="the authority key (default DIR/../authority)"
    )
    parser.add_argument(
        "--log-keys-dir", metavar="DIR", help="the log's signing keys (default DIR/log-keys)"
    )


def _token_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--consumer-token", required=True, metavar="T", help="the consumer's token ('-': stdin)"
    )
    parser.add_argument("--consumer", help="consumer name (default: the one the token names)")


def _list(value: str | None) -> tuple[str, ...]:
    return tuple(n for n in (value or "").split(",") if n)


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``saihm memory`` and its actions."""
    parser = commands.add_parser(
        "memory",
        help="RFC 0007 memory provider (local-vault): init, grant, query, pending, ...",
        one_line_errors=False,
        description="RFC 0007 Memory Provider: the local-vault over this operator's store.",
        epilog=EPILOG,
    )
    sub = parser.add_subparsers(
        dest="action",
        metavar="ACTION",
        required=True,
        parser_class=functools.partial(Parser, one_line_errors=False),
    )

    p = sub.add_parser("init", help="set up the vault for a data directory")
    _common(p)
    p.add_argument("--holder", help="use this existing holder (64 hex) instead of a new one")

    p = sub.add_parser("grant", help="grant a consumer memory access (logged GRANT)")
    _common(p)
    p.add_argument("consumer", help="consumer name, e.g. cursor")
    p.add_argument("--memory", metavar="NS,NS", help="namespaces (omitted: no memory access)")
    p.add_argument("--write", action="store_true", help="also let it propose stores")
    p.add_argument("--mode", choices=["read", "write", "readwrite"], help="explicit mode")
    p.add_argument("--sections", metavar="A,B", help="passport sections, recorded in the grant")
    p.add_argument("--ttl", type=int, default=30 * 86_400, help="lifetime in seconds")

    p = sub.add_parser("forget", help="erase a record as the person (logged FORGET)")
    _common(p)
    p.add_argument("id", help="record id (64 hex)")

    sub.add_parser(
        "mcp",
        help="RFC 0007 MCP stdio server: get_memory_context, get_passport_context",
        description=(
            "An MCP stdio server with the tools get_memory_context and get_passport_context, "
            "over a running saihm serve. SAIHM_ENDPOINT_URL is the operator's root URL; "
            'SAIHM_AUTH_HEADER is "Bearer <consumer token>" from saihm memory grant. '
            "It lists its tools without contacting the operator."
        ),
    )

    p = sub.add_parser(
        "register", help="add this vault to providers.json (RFC 0007 provider registry)"
    )
    _common(p)
    p.add_argument(
        "--file", metavar="PATH", help="the registry (default ~/.ai-passport/memory/providers.json)"
    )
    p.add_argument("--endpoint", metavar="URL", help="the operator URL consumers should use")

    p = sub.add_parser("revoke", help="withdraw a consumer's grant (logged UNGRANT)")
    _common(p)
    p.add_argument("consumer")

    p = sub.add_parser("store", help="store a record as the person (logged REMEMBER)")
    _common(p)
    p.add_argument("--namespace", required=True)
    p.add_argument("--json", required=True, dest="content", help="the record content (JSON)")
    p.add_argument("--confidence", type=float)
    p.add_argument("--verified-at", help="ISO 8601")
    p.add_argument("--sources", type=int)

    for name, text in (("query", "a consumer's excerpt"), ("export", "the context block")):
        p = sub.add_parser(name, help=text + " (logged RECALL)")
        _common(p)
        _token_arg(p)
        p.add_argument("--namespaces", metavar="NS,NS", help="default: all the grant allows")
        p.add_argument("--limit", type=int, default=50)
        p.add_argument("--max-bytes", type=int)
        p.add_argument("--text", help="keywords every record must contain")

    p = sub.add_parser("graph", help="entities and relations a consumer may see (logged RECALL)")
    _common(p)
    _token_arg(p)
    p.add_argument("--namespaces", metavar="NS,NS")
    p.add_argument("--entity")
    p.add_argument("--depth", type=int, default=1)
    p.add_argument("--limit", type=int, default=50)

    p = sub.add_parser("propose", help="a consumer's write proposal (held as pending)")
    _common(p)
    _token_arg(p)
    p.add_argument("--namespace", required=True)
    p.add_argument("--json", required=True, dest="content")

    p = sub.add_parser("status", help="provider status for a consumer token")
    _common(p)
    _token_arg(p)

    p = sub.add_parser("pending", help="list write proposals awaiting the person")
    _common(p)
    p.add_argument("--brief", action="store_true", help="do not decrypt the proposals")
    for name in ("accept", "reject"):
        p = sub.add_parser(name, help=f"{name} a pending proposal")
        _common(p)
        p.add_argument("id", help="proposal id (64 hex)")
    for action in sub.choices.values():
        action.set_defaults(run=run)


def _emit(obj: object) -> None:
    print(json.dumps(obj, sort_keys=False), flush=True)


def run(ns: argparse.Namespace) -> int:
    """Run the ``saihm memory`` action ``ns.action``."""
    from pydantic import ValidationError

    from saihm.provider.records import schema_refusal

    if ns.action == "mcp":
        from saihm.provider.mcp import main as mcp_main

        return mcp_main()
    try:
        return _run(ns)
    except ValidationError as err:
        raise schema_refusal(err) from err


def _run(ns: argparse.Namespace) -> int:
    from saihm.authority import Authority
    from saihm.compose import open_operator
    from saihm.provider.vault import LocalVault

    config = Config.for_data(ns.data, ns.kek_dir, ns.authority_dir, ns.log_keys_dir)
    if not config.authority_public_key_file.is_file():
        # Only `saihm serve` creates a data directory: a typo must not make a new store.
        raise NotFound(f"data directory {ns.data} does not exist or is not a saihm data directory")
    operator = open_operator(config, checkpointer=False)
    try:
        # Only issuing a consumer's token needs the authority key; the person's own store,
        # forget and accept act in process with the person's Access (Store.person_access).
        needs_authority = ns.action in ("init", "grant")
        authority = Authority.open(config.authority_dir) if needs_authority else None
        if ns.action == "init":
            holder = _hex32(ns.holder) if ns.holder else None
            vault, created = LocalVault.init(operator, authority, holder)
            _emit({**vault.meta.to_json(), "created": created})
            return 0
        vault = LocalVault.open(operator, authority)
        return _ACTIONS[ns.action](vault, ns)
    finally:
        operator.store.close()


def _hex32(value: str) -> bytes:
    try:
        raw = bytes.fromhex(value)
    except ValueError as err:
        raise MalformedInput("expected 64 hex characters") from err
    if len(raw) != 32:
        raise MalformedInput("expected 64 hex characters")
    return raw


def _token(ns: argparse.Namespace) -> tuple[str, str]:
    """(token, consumer name): the name from --consumer or, by shape only, from the token.

    The token's claims are checked by the store on the call itself.
    """
    from saihm.events import Capability

    token = sys.stdin.readline().strip() if ns.consumer_token == "-" else ns.consumer_token
    consumer = ns.consumer
    if consumer is None:
        try:
            consumer = Capability.from_token(token).scope.consumer
        except SaihmError as err:
            raise MalformedInput("the consumer token is malformed") from err
        if consumer is None:
            raise MalformedInput("the token is not a consumer grant")
    return token, consumer


def _grant(vault, ns) -> int:
    mode = ns.mode or ("readwrite" if ns.write else "read") if ns.memory else None
    if ns.mode and not ns.memory:
        raise MalformedInput("--mode needs --memory NS,NS")
    grant, token = vault.grant(ns.consumer, _list(ns.memory), mode, _list(ns.sections), ns.ttl)
    entry = vault.meta.consumers[ns.consumer]
    _emit(
        {
            "grant": grant.model_dump(mode="json"),
            "grantId": entry.get("grantId"),
            "expiresAt": entry.get("expiresAt"),
            "token": token,
        }
    )
    return 0


def _forget(vault, ns) -> int:
    _emit(vault.forget(ns.id))
    return 0


def _register(vault, ns) -> int:
    from pathlib import Path

    from saihm.provider import registry

    path = Path(ns.file) if ns.file else registry.default_path()
    item = registry.register(path, vault.data_dir, ns.endpoint)
    _emit({"registry": str(path), "provider": item})
    return 0


def _revoke(vault, ns) -> int:
    _emit(vault.revoke(ns.consumer))
    return 0


def _store(vault, ns) -> int:
    from saihm.provider.records import parse_store

    request = parse_store(
        ns.content,
        ns.namespace,
        confidence=ns.confidence,
        verified_at=ns.verified_at,
        sources=ns.sources,
    )
    _emit(vault.store(request).model_dump(mode="json"))
    return 0


def _query(vault, ns) -> int:
    from saihm.provider.models import MemoryContext, MemoryQuery

    token, consumer = _token(ns)
    request = MemoryQuery(
        consumer=consumer,
        namespaces=_list(ns.namespaces),
        limit=ns.limit,
        max_bytes=ns.max_bytes,
        text=ns.text,
    )
    excerpt = vault.for_consumer(token).query(request)
    if ns.action == "export":
        _emit(MemoryContext(excerpt=excerpt).block())
    else:
        _emit(excerpt.model_dump(mode="json"))
    return 0


def _graph(vault, ns) -> int:
    from saihm.provider.models import GraphQuery

    token, consumer = _token(ns)
    request = GraphQuery(
        consumer=consumer,
        namespaces=_list(ns.namespaces),
        entity=ns.entity,
        depth=ns.depth,
        limit=ns.limit,
    )
    _emit(vault.for_consumer(token).graph(request).model_dump(mode="json"))
    return 0


def _propose(vault, ns) -> int:
    from saihm.provider.records import parse_store

    token, consumer = _token(ns)
    request = parse_store(ns.content, ns.namespace, consumer=consumer)
    _emit(vault.for_consumer(token).store(request).model_dump(mode="json"))
    return 0


def _status(vault, ns) -> int:
    token, _ = _token(ns)
    _emit(vault.for_consumer(token).status().model_dump(mode="json"))
    return 0


def _pending(vault, ns) -> int:
    _emit({"pending": [p.model_dump(mode="json") for p in vault.pending(show=not ns.brief)]})
    return 0


def _accept(vault, ns) -> int:
    _emit(vault.accept(ns.id).model_dump(mode="json"))
    return 0


def _reject(vault, ns) -> int:
    from saihm.errors import NotFound

    if not vault.reject(ns.id):
        raise NotFound("no such pending proposal")
    _emit({"id": ns.id, "rejected": True})
    return 0


_ACTIONS: dict[str, Callable[..., int]] = {
    "grant": _grant,
    "revoke": _revoke,
    "forget": _forget,
    "register": _register,
    "store": _store,
    "query": _query,
    "export": _query,
    "graph": _graph,
    "propose": _propose,
    "status": _status,
    "pending": _pending,
    "accept": _accept,
    "reject": _reject,
}
