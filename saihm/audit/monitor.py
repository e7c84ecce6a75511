"""``saihm monitor``: keep a verified mirror of a log; alarm on rollback, fork or worse.

Each round (``check_once``) is one ``saihm mirror`` run into the state directory (audit/mirror.py):
the current checkpoint, its signatures under the pinned keys (``--trust KEYFILE`` at first
contact, else the log's ``v1/keys`` on first use), then every new entry bundle and hash tile,
every receipt verified against its holder's KEY receipt, the tree rebuilt from the entries and
compared with every tile and signed root. Nothing is sampled and there is no cap:

- a checkpoint smaller than one held: **rollback**; another root for a size held, or entries
  that do not extend the held tree: **fork**; a signature that does not verify: **bad
  signature**; a receipt, tile or root that fails a check: its failure;
- leaves served beyond the checkpoint for longer than ``--max-stale`` seconds: **stale** (the
  log stopped signing while receipts are being handed out; live operators only, through
  ``/log/v1/entries``).

A head that raised an alarm is never adopted. The state directory is a mirror directory: the
tlog-tiles tree, ``checkpoints/<size>.note`` (every adopted signed note, usable as ``saihm verify
--checkpoint``), ``.saihm-mirror/`` (pinned keys, verified prefix) and ``monitor.json`` (when
the log was first seen stale). Network I/O is synchronous (urllib); only ``main`` sleeps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from saihm.audit.fetch import FetchError, HttpSource
from saihm.audit.mirror import mirror
from saihm.errors import SaihmError

__all__ = ["Round", "check_once", "main"]


@dataclass
class Round:
    """The outcome of one monitoring round."""

    size: int | None = None
    root: str | None = None
    alarms: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verified: int = 0

    @property
    def ok(self) -> bool:
        return not self.alarms


def check_once(
    url: str,
    state_dir: str | Path,
    *,
    trust: list[str] | None = None,
    max_stale: float = 300.0,
    now: float | None = None,
    workers: int = 1,
) -> Round:
    """Run one monitoring round against ``url``; return its outcome (alarms, head).

    Raises ``FetchError`` when the log cannot be read at all.
    """
    state = Path(state_dir)
    clock = time.time() if now is None else now
    outcome = mirror(url, state, trust=trust, workers=workers)
    result = Round(size=outcome.size, root=outcome.root, verified=outcome.new_entries)
    result.alarms += outcome.alarms + [str(f) for f in outcome.report.failures]
    result.notes += outcome.report.notes
    if outcome.adopted and outcome.size is not None:
        _check_staleness(HttpSource(url), outcome.size, state, clock, max_stale, result)
    return result


def _check_staleness(
    source: HttpSource, size: int, state: Path, clock: float, max_stale: float, result: Round
) -> None:
    """Leaves beyond the signed size mean receipts exist that no checkpoint covers yet."""
    path = state / "monitor.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    try:
        beyond = source.get(f"v1/entries?start={size}&end={size + 1}") is not None
    except FetchError:
        beyond = False  # a static publication has no entries API; the tiles are all there is
    if not beyond:
        data.pop("staleSince", None)
    else:
        since = data.setdefault("staleSince", clock)
        if clock - since > max_stale:
            result.alarms.append(
                f"stale: entries beyond checkpoint size {size} for {clock - since:.0f} s"
            )
    tmp = state / "monitor.json.tmp"
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def main(argv: list[str]) -> int:
    """``saihm monitor URL --state DIR [--trust FILE] [--interval S] [--once] ...``."""
    parser = argparse.ArgumentParser(
        prog="saihm monitor",
        description="Keep a verified mirror of a SAIHM log (every entry, tile and checkpoint) "
        "and alarm on rollback, fork, bad signature, a failed check or a stale log. With "
        "--once, exit 1 on any alarm and 2 when the log cannot be read.",
    )
    parser.add_argument("url", help="the operator's base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--state", required=True, help="state directory: a mirror directory")
    parser.add_argument(
        "--trust", help="pin these verifier keys at first contact (file; default: the log's own)"
    )
    parser.add_argument(
        "--interval", type=float, default=60.0, help="seconds between rounds (default 60)"
    )
    parser.add_argument("--once", action="store_true", help="one round; exit 1 on any alarm")
    parser.add_argument(
        "--max-stale",
        type=float,
        default=300.0,
        metavar="S",
        help="alarm when leaves stay beyond the checkpoint this long (default 300)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="signature-check processes (default 1)"
    )
    opts = parser.parse_args(argv)
    trust = None
    if opts.trust:
        lines = Path(opts.trust).read_text().splitlines()
        trust = [k.strip() for k in lines if k.strip() and not k.startswith("#")]
    while True:
        unreadable = False
        try:
            result = check_once(
                opts.url, opts.state, trust=trust, max_stale=opts.max_stale, workers=opts.workers
            )
        except (SaihmError, OSError, ValueError) as err:
            unreadable = True
            result = Round(alarms=[f"unreachable or malformed answer: {err}"])
        line = {"url": opts.url, "size": result.size, "root": result.root}
        line |= {"verified": result.verified, "alarms": result.alarms, "notes": result.notes}
        print(json.dumps(line), flush=True)
        for alarm in result.alarms:
            print(f"saihm monitor: ALARM: {alarm}", file=sys.stderr, flush=True)
        if opts.once:
            return 2 if unreadable else 0 if result.ok else 1
        time.sleep(opts.interval)
