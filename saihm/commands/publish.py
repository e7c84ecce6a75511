"""``saihm publish --data DIR --to OUT``: the operator's log as static tlog-tiles files.

The command side of ``saihm.audit.publish`` (which may not import the store): it opens the data
directory's store, reads the log through the store's public-log reads (``checkpoint_now``,
``tile``, ``entry_bundle``; docs/formats.md §1) and lets ``publish`` bring OUT up to date.
Exit 0 on success, 1 when OUT holds something publishing must not overwrite (another log, a
larger checkpoint, a different full tile), 2 for bad usage or an unreadable data directory.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from saihm.errors import CommandError, Conflict, SaihmError, message

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``saihm publish``."""
    parser = commands.add_parser(
        "publish",
        help="write the log as static tlog-tiles files for any web server or CDN",
        one_line_errors=False,
        description="Write the log as a C2SP tlog-tiles tree (checkpoint, tile/..., "
        "tile/entries/..., v1/keys at OUT's root) for any static web server or CDN. "
        "Incremental: full tiles are written once and never rewritten; only partial tiles and "
        "the checkpoint (written last, atomically) change. Run it again (e.g. from cron) to "
        "publish new entries.",
    )
    parser.add_argument("--data", required=True, help="the operator's data directory")
    parser.add_argument(
        "--to",
        required=True,
        metavar="OUT",
        help="the publication directory (created if new), or s3://BUCKET[/PREFIX] with the "
        "saihm[s3] extra (boto3, configured by the usual AWS_* variables)",
    )
    parser.add_argument("--kek-dir", help="KEK directory (default: <data>/../kek)")
    parser.add_argument("--log-keys-dir", help="checkpoint signing keys (default: <data>/log-keys)")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="the log's PostgreSQL store (also $SAIHM_STORE; default: LMDB in <data>/lmdb)",
    )
    parser.set_defaults(run=run)


def run(opts: argparse.Namespace) -> int:
    """Publish the data directory's log to ``--to``."""
    from saihm.storage.url import ENV, check_store_url, scrub

    opts.store = opts.store or os.environ.get(ENV) or None
    if opts.store is not None:
        check_store_url(opts.store)
    held = "authority.pub" if opts.store else "lmdb/data.mdb"
    if not (Path(opts.data) / held).is_file():
        raise SaihmError(f"{opts.data} is not a saihm data directory")
    from saihm.audit.publish import Target, TileDir, publish

    target: Target
    if opts.to.startswith("s3://"):
        from saihm.audit.s3 import S3Tiles

        target = S3Tiles(opts.to)
    else:
        target = TileDir(opts.to)
    from saihm.compose import open_operator
    from saihm.config import Config

    overrides = {}
    if opts.kek_dir:
        overrides["kek_dir"] = Path(opts.kek_dir)
    if opts.log_keys_dir:
        overrides["log_keys_dir"] = Path(opts.log_keys_dir)
    try:
        if opts.store is None:
            from saihm.storage.url import refuse_migrated

            refuse_migrated(Path(opts.data))
        config = Config.for_data(Path(opts.data), store=opts.store, **overrides)
        operator = open_operator(config, checkpointer=False)
    except (SaihmError, OSError) as err:
        raise SaihmError(f"cannot open {opts.data}: {scrub(message(err), opts.store)}") from err
    store = operator.store
    try:
        result = publish(store, target, verifier_keys=store.log_keys.verifier_keys())
        if isinstance(target, TileDir):
            # The log explorer beside the tiles (docs/operations.md "The log explorer"),
            # written like the tiles: never through a link under OUT.
            from saihm.http.explorer import static_files

            for name, data in static_files().items():
                target.write(f"explorer/{name}", data, immutable=False)
    except Conflict as err:
        raise CommandError(f"refused: {err}", exit_code=1) from err
    except OSError as err:
        raise SaihmError(f"cannot write {opts.to}: {message(err)}") from err
    finally:
        store.close()
    print(json.dumps({"to": opts.to, **result}))
    return 0
