"""``saihm backup --data DIR DEST`` (saihm.offline.backup makes the copy)."""

from __future__ import annotations

import argparse
import json
import sys

from saihm.commands.common import config_from, data_options, settled
from saihm.errors import MalformedInput, Unavailable

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``saihm backup``."""
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
    data_options(backup)
    backup.add_argument(
        "--include-log-keys",
        action="store_true",
        help="also copy the log's private checkpoint signing keys found in the data directory "
        "(default: left out, like every other key)",
    )
    backup.add_argument("dest", metavar="DEST", help="the new backup directory")
    backup.set_defaults(run=run)


@settled
def run(args: argparse.Namespace) -> int:
    """Prints the report as one JSON line, and one line on stderr for each key file or
    directory left out."""
    from saihm.offline.backup import LOG_KEYS, backup

    if args.store is not None:
        raise MalformedInput(
            "saihm backup copies an LMDB data directory; back a PostgreSQL store up with "
            "pg_dump or the database's continuous archiving (docs/operations.md)"
        )
    try:
        report = backup(config_from(args), args.dest, include_log_keys=args.include_log_keys)
    except OSError as err:
        raise Unavailable(f"cannot write the backup: {err.strerror or err}") from err
    print(json.dumps(report.to_json()), flush=True)
    for path, kind in report.left_out:
        hint = "; --include-log-keys copies them" if kind == LOG_KEYS else ""
        print(f"saihm backup: left out {path} ({kind}{hint})", file=sys.stderr)
    return 0
