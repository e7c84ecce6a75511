"""``saihm migrate --from DIR --to URL`` (saihm.offline.migrate makes the copy)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from saihm.commands.common import settled
from saihm.errors import NotFound

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``saihm migrate``."""
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
    migrate.set_defaults(run=run, store=None)


@settled
def run(args: argparse.Namespace) -> int:
    """Prints the report as one JSON line."""
    from saihm.audit.progress import progress
    from saihm.offline.migrate import MigrateReport, migrate_storage, store_namespaces
    from saihm.storage import open_storage
    from saihm.storage.url import MARKER, check_store_url, redact, refuse_migrated

    data = Path(args.data).absolute()
    url = check_store_url(args.target)
    refuse_migrated(data)
    lmdb_dir = data / "lmdb"
    if not (lmdb_dir / "data.mdb").is_file():
        raise NotFound(f"{data} holds no LMDB store ({lmdb_dir} is missing)")
    names = store_namespaces()
    shown = redact(url)

    def record(report: MigrateReport) -> None:
        done = {"to": shown, "treeSize": report.tree_size, "at": int(time.time())}
        (data / MARKER).write_text(json.dumps(done) + "\n")

    source = open_storage(lmdb_dir, names)
    try:
        target = open_storage(url, names)
        try:
            with progress(not args.no_progress) as bar:
                report = migrate_storage(source, target, names, tasks=bar.task, committed=record)
        finally:
            target.close()
    finally:
        source.close()
    print(json.dumps({"from": str(data), "to": shown, **report.to_json()}), flush=True)
    print(
        f"saihm migrate: done; serve it with: saihm serve --data {data} --store URL "
        f"(stop any server still on the LMDB store: {data / MARKER} now refuses it)",
        file=sys.stderr,
    )
    return 0
