"""``saihm authority serve`` on the command line (its parser; the service is
:mod:`saihm.services.authority`, imported only when the command runs)."""

from __future__ import annotations

import argparse

from saihm.commands.common import config_from

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from saihm.services import authority as service

    options = service.ServiceOptions(
        config=config_from(args),
        listen=args.listen,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        operator_url=args.operator_url,
    )
    return service.main(options)


def register(commands: argparse._SubParsersAction) -> None:
    """Register ``authority serve`` on the ``saihm`` parser."""
    authority = commands.add_parser(
        "authority", help="the capability authority as a service (docs/authority.md)"
    ).add_subparsers(dest="sub", required=True)
    serve = authority.add_parser(
        "serve",
        help="serve create holder, open/renew/revoke session, grant/revoke grant as JSON",
        description="Run the authority's JSON service in its own process, with the authority's "
        "key directory, on its own port; the operator ('saihm serve') keeps only the public key. "
        "Every call needs the admin credential, made on first start in "
        "DIR/admin.credential (mode 0600), as 'Authorization: Bearer <credential>'. Each call "
        "logs exactly what its command (holder create, session open/renew/revoke, grant, grant "
        "revoke) logs. Paths and bodies: docs/authority.md.",
    )
    serve.add_argument(
        "--authority-dir",
        required=True,
        metavar="DIR",
        help="the authority's key directory (and the admin credential's)",
    )
    serve.add_argument("--data", required=True, metavar="DIR", help="the operator's data directory")
    serve.add_argument("--kek-dir", metavar="DIR", help="KEK generations (default: DIR/../kek)")
    serve.add_argument(
        "--log-keys-dir", metavar="DIR", help="the log's signing keys (default: DIR/log-keys)"
    )
    serve.add_argument(
        "--store",
        metavar="URL",
        help="the operator's PostgreSQL store (also $SAIHM_STORE; default: LMDB in DIR/lmdb)",
    )
    serve.add_argument(
        "--listen",
        default="127.0.0.1:8090",
        metavar="HOST:PORT",
        help="address to listen on (plain http only on the loopback)",
    )
    serve.add_argument(
        "--operator-url",
        default="http://localhost:8080/",
        metavar="URL",
        help="where the operator serves /me/: person links point there and passkeys bind to "
        "its host (default http://localhost:8080/; plain http only for localhost)",
    )
    serve.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate")
    serve.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    serve.set_defaults(run=_run)
