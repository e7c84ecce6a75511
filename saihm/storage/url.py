"""``--store URL`` at the command line: the check of a PostgreSQL URL and its safe rendering.

DESIGN.md "Pinned additions for the second round": ``--store postgresql://...`` puts the log
and the private state in a PostgreSQL database (docs/scaling.md). A URL may carry a password
(``postgresql://user:secret@host/db``); nothing here, and nothing that uses :func:`redact`,
lets it reach a message, a log line or a report.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from saihm.errors import Conflict, MalformedInput

__all__ = [
    "ELSEWHERE",
    "ENV",
    "MARKER",
    "check_store_url",
    "record_store_elsewhere",
    "redact",
    "refuse_migrated",
    "refuse_other_store",
    "scrub",
]

#: The environment variable every command reads when ``--store`` is not given.
ENV = "SAIHM_STORE"
#: The file in DIR that ``saihm migrate`` writes (the target without its password, the size).
MARKER = "migrated"
_SCHEMES = ("postgresql", "postgres")
#: ``user:password@`` in a URL's authority, and ``password=...`` in its query or a DSN.
_USERINFO = re.compile(r"(?P<head>://[^:/?#@\s]*):[^@/?#\s]*@")
_PASSWORD_PARAM = re.compile(r"(?i)(?P<head>\bpassword=)[^&\s]*")


def redact(text: str) -> str:
    """``text`` with every password of a URL or ``password=`` parameter in it replaced by
    ``***`` (the user, host, port and database stay, so a message still says which store)."""
    text = _USERINFO.sub(r"\g<head>:***@", text)
    return _PASSWORD_PARAM.sub(r"\g<head>***", text)


def scrub(message: str, url: str | None) -> str:
    """``message`` with ``url``'s password removed, whether the message quotes the URL whole,
    redacted or only the password itself (a driver may echo any of them)."""
    message = redact(message)
    if url:
        for secret in _passwords(url):
            if secret:
                message = message.replace(secret, "***")
    return message


def _passwords(url: str) -> list[str]:
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
        found += [v for k, v in parse_qsl(parts.query) if k.lower() == "password"]
    except ValueError:
        return []
    return [p for p in found if len(p) >= 3]


def check_store_url(url: str) -> str:
    """``url`` if it names a PostgreSQL database (``postgresql://`` or ``postgres://``, libpq's
    URI form); otherwise :class:`MalformedInput` whose message never shows the password.

    Only the form is checked here: whether the database answers is the driver's to say when
    the store opens (saihm.storage.postgres).
    """
    shown = redact(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise MalformedInput(f"--store {shown}: not a valid URL") from None
    if parts.scheme not in _SCHEMES:
        raise MalformedInput(
            f"--store {shown}: expected a postgresql://USER@HOST[:PORT]/DATABASE URL "
            "(leave --store out for LMDB in DATA/lmdb)"
        )
    return url


#: Written in a data directory the first time a store opens on a ``postgresql://`` URL with it:
#: from then on, opening the directory without ``--store`` (an empty LMDB store beside the
#: real one, where a KEK rotation would find no wrapped key and retire them all) is refused.
ELSEWHERE = "store-elsewhere"


def record_store_elsewhere(data_dir: str | Path, url: str) -> None:
    """Mark ``data_dir`` as the node-local half of the store at ``url`` (written once; the URL
    without its password). :func:`refuse_migrated` then refuses its LMDB store."""
    marker = Path(data_dir) / ELSEWHERE
    if not marker.exists():
        marker.write_text(json.dumps({"to": redact(url)}) + "\n")


def refuse_migrated(data_dir: str | Path) -> None:
    """Refuse to open ``data_dir``'s LMDB store once ``saihm migrate`` moved it (``DIR/migrated``):
    its log continues in PostgreSQL, and a second continuation here would fork it. Raises
    :class:`Conflict` naming ``--store``."""
    marker = Path(data_dir) / MARKER
    if marker.is_file():
        try:
            where = json.loads(marker.read_text()).get("to", "a PostgreSQL store")
        except (OSError, ValueError, AttributeError):
            where = "a PostgreSQL store"
        raise Conflict(
            f"{data_dir} was migrated to {where}: use --store URL (its LMDB store is "
            f"kept only as a record; remove {marker} to use it instead)"
        )
    elsewhere = Path(data_dir) / ELSEWHERE
    if elsewhere.is_file():
        try:
            where = json.loads(elsewhere.read_text()).get("to", "a PostgreSQL store")
        except (OSError, ValueError, AttributeError):
            where = "a PostgreSQL store"
        raise Conflict(
            f"{data_dir} holds the node-local files of the store at {where}: "
            "use --store URL (or $SAIHM_STORE)"
        )


# A ``search_path`` setting in libpq's ``options`` (``-c search_path=S``, ``-csearch_path=S`` or
# ``--search-path=S``); the last one given wins, as on the server.
_SEARCH_PATH = re.compile(r"(?:^|(?<=\s))(?:-c\s*|--)search[-_]path=(\S*)", re.IGNORECASE)


def _store_identity(url: str) -> tuple[str, str] | None:
    """What names a store's data in a URL: ``(database, search_path)``, or None when the URL
    does not parse. The user, password, host, port and every other setting may differ
    between the nodes of one store (a node's own ``lock_timeout``, another host name for the
    same server) and are not compared."""
    try:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
    except ValueError:
        return None
    database = query.get("dbname") or unquote(parts.path.lstrip("/"))
    paths = _SEARCH_PATH.findall(query.get("options", ""))
    return database, paths[-1] if paths else ""


def _recorded_store(data_dir: Path) -> tuple[str, str] | None:
    """The store URL (without its password) that ``data_dir``'s markers record: the one its
    store opened on first (:data:`ELSEWHERE`), else the target of ``saihm migrate``."""
    for name in (ELSEWHERE, MARKER):
        marker = data_dir / name
        if marker.is_file():
            try:
                where = json.loads(marker.read_text()).get("to")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(where, str):
                return where, name
    return None


def refuse_other_store(data_dir: str | Path, url: str) -> None:
    """Refuse to open the store at ``url`` with ``data_dir`` when the directory is the
    node-local half of another store (another database, or another schema by its
    ``search_path``): the keys of the KEK directory wrap that store's DEKs, and a KEK
    rotation over a store that holds none of them would retire every generation. Raises
    :class:`Conflict` naming ``--store`` and the recorded store (without its password)."""
    recorded = _recorded_store(Path(data_dir))
    if recorded is None:
        return
    where, name = recorded
    expected, given = _store_identity(where), _store_identity(url)
    if expected is None or given is None or expected == given:
        return
    raise Conflict(
        f"{data_dir} holds the node-local files of the store at {where}, not {redact(url)}: "
        f"use --store with that store's URL (remove {Path(data_dir) / name} only if the "
        "directory now belongs to the other store)"
    )
