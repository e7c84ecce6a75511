"""``saihm person-link``: the authority's one-time link that lets a person enrol a passkey at
the operator's ``/me/`` page, in process (beside a development ``saihm serve``); ``saihm
authority serve`` offers the same as ``POST /v1/person-links`` (docs/authority.md)."""

from __future__ import annotations

import argparse
import sys

from saihm.commands.common import config_from, data_options, emit, hex32, settled

__all__ = ["register"]


@settled
def _person_link(args: argparse.Namespace) -> int:
    from saihm.authority import Authority
    from saihm.authority.person import PersonState
    from saihm.compose import open_operator

    holder_id = hex32(args.holder, "holder")
    config = config_from(args)
    Authority.open(config.authority_dir)  # only the authority's machine mints links
    operator = open_operator(config, checkpointer=False)
    try:
        link = PersonState(operator.store).mint_link(holder_id, args.operator_url, args.ttl)
    finally:
        operator.store.close()
    emit({"url": link["url"], "expiresAt": link["expiresAt"], "expiresAtUtc": link["expiresAtUtc"]})
    print(
        f"saihm: give this link to the person only: it enrols a passkey once, until "
        f"{link['expiresAtUtc']}",
        file=sys.stderr,
        flush=True,
    )
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``saihm person-link``."""
    link = commands.add_parser(
        "person-link",
        help="a one-time link that enrols the person's passkey at /me/ (docs/authority.md)",
        description="Print {url, expiresAt, expiresAtUtc}: a link, single use, at most a day, "
        "that opens the operator's /me/ page to create a passkey for the holder. The person "
        "then signs in with it; a person who lost every passkey gets a new link. The one-time "
        "code rides in the URL's fragment, which no server log or Referer sees.",
    )
    data_options(link)
    link.add_argument("--holder", required=True, metavar="HOLDERID", help="the person's holder id")
    link.add_argument(
        "--operator-url",
        default="http://localhost:8080/",
        metavar="URL",
        help="where the operator serves /me/ (default http://localhost:8080/; a passkey binds "
        "to its host name, so not an IP address)",
    )
    link.add_argument(
        "--ttl",
        type=int,
        default=86_400,
        metavar="SECONDS",
        help="how long the link lives (1 to 86400; default 86400)",
    )
    link.set_defaults(run=_person_link)
