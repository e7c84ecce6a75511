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

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from saihm.audit.fetch import FetchError, HttpSource
from saihm.audit.mirror import mirror
from saihm.audit.mirrorstate import DIRNAME
from saihm.audit.report import Alarm, AlarmKind, Failure
from saihm.errors import CommandError, SaihmError
from saihm.translog.witness import verify_cosignatures

__all__ = ["MonitorOptions", "Round", "check_once", "run"]


@dataclass
class Round:
    """The outcome of one monitoring round."""

    size: int | None = None
    root: str | None = None
    alarms: list[Alarm | Failure] = field(default_factory=list)
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
    witnesses: list[str] | None = None,
    min_witnesses: int = 1,
) -> Round:
    """Run one monitoring round against ``url``; return its outcome (alarms, head).

    With ``witnesses`` (verifier keys), the round also checks the newest witnessed checkpoint
    (``/log/checkpoint?witnessed=1``) and alarms unless ``min_witnesses`` of them cosigned it
    (:func:`saihm.translog.witness.verify_cosignatures`). Raises ``FetchError`` when the log
    cannot be read at all.
    """
    state = Path(state_dir)
    clock = time.time() if now is None else now
    outcome = mirror(url, state, trust=trust, workers=workers)
    result = Round(size=outcome.size, root=outcome.root, verified=outcome.new_entries)
    result.alarms += [*outcome.alarms, *outcome.report.failures]
    result.notes += outcome.report.notes
    if witnesses:
        source = HttpSource(url)
        note = source.get("checkpoint?witnessed=1")
        try:
            if note is None:
                raise SaihmError("the log serves no witnessed checkpoint")
            verify_cosignatures(note, witnesses, min_witnesses, now=clock)
        except SaihmError as err:
            result.alarms.append(Alarm(AlarmKind.WITNESSES, str(err)))
        else:
            _check_witnessed_staleness(note, outcome.size, state, clock, max_stale, result)
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
                Alarm(
                    AlarmKind.STALE,
                    f"entries beyond checkpoint size {size} for {clock - since:.0f} s",
                )
            )
    tmp = state / "monitor.json.tmp"
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


#: Exit codes of ``saihm monitor --once``: the log's fault (an alarm) is 1; the monitor's own
#: bad configuration (URL, --trust file, state directory) is 2 and contacts nobody.
EXIT_ALARM = 1
EXIT_CONFIG = 2


class MonitorConfigError(SaihmError):
    """The monitor's own configuration is unusable: not the operator's fault."""


def _configuration(opts: MonitorOptions) -> list[str] | None:
    """Check what the monitor itself was given before contacting anyone; return the keys of
    ``--trust``. Raises :class:`MonitorConfigError` naming the problem."""
    from urllib.parse import urlsplit

    parts = urlsplit(opts.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MonitorConfigError(f"URL must be http(s)://HOST[:PORT], not {opts.url!r}")
    if opts.interval <= 0 or opts.max_stale < 0 or opts.workers < 1:
        raise MonitorConfigError("--interval must be positive, --max-stale >= 0, --workers >= 1")
    state = Path(opts.state)
    try:
        state.mkdir(parents=True, exist_ok=True)
        probe = state / ".writable"
        probe.write_bytes(b"")
        probe.unlink()
        pinned = state / DIRNAME / "keys.txt"
        keys_text = pinned.read_text() if pinned.exists() else None
        saved = state / "monitor.json"
        if saved.exists():
            json.loads(saved.read_text())
    except OSError as err:
        raise MonitorConfigError(f"state directory {state}: {err.strerror or err}") from err
    except ValueError as err:
        raise MonitorConfigError(f"state directory {state}: monitor.json is corrupt") from err
    held = None
    if keys_text is not None:
        held = _check_keys(keys_text.splitlines(), f"{state / DIRNAME / 'keys.txt'}")
    if not opts.trust:
        return None
    try:
        lines = Path(opts.trust).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise MonitorConfigError(f"--trust {opts.trust}: cannot read it") from err
    trust = _check_keys(lines, f"--trust {opts.trust}")
    if held is not None and sorted(held) != sorted(trust):
        raise MonitorConfigError(f"--trust {opts.trust}: other keys than those pinned in {state}")
    return trust


def _check_keys(lines: list[str], where: str) -> list[str]:
    from saihm.translog.checkpoint import verifier_from_key

    keys = [k.strip() for k in lines if k.strip() and not k.startswith("#")]
    if not keys:
        raise MonitorConfigError(f"{where}: holds no verifier key")
    for key in keys:
        try:
            verifier_from_key(key)
        except SaihmError as err:
            raise MonitorConfigError(f"{where}: not a verifier key: {key[:40]!r}") from err
    return keys


def _check_witnessed_staleness(
    note: bytes, size: int | None, state: Path, clock: float, max_stale: float, result: Round
) -> None:
    """The witnessed head trails a busy log by a moment: entries beyond it are expected while
    it advances, and stale once no new cosigned checkpoint came for ``max_stale`` seconds."""
    witnessed = int(note.split(b"\n", 2)[1])
    path = state / DIRNAME / "witnessed.json"
    held = json.loads(path.read_text()) if path.exists() else {}
    if held.get("size") != witnessed:
        held = {"size": witnessed, "since": clock}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(held))
    behind = size is not None and size > witnessed
    if behind and clock - float(held["since"]) > max_stale:
        result.alarms.append(
            Alarm(
                AlarmKind.STALE,
                f"no new cosigned checkpoint for {clock - float(held['since']):.0f} s "
                f"(witnessed size {witnessed}, log size {size})",
            )
        )


@dataclass(frozen=True)
class MonitorOptions:
    """``saihm monitor URL --state DIR ...`` (parsed in saihm.commands.audit); ``witness``
    keys and the ``min_witnesses`` needed are already checked against each other."""

    url: str
    state: str
    trust: str | None = None
    interval: float = 60.0
    once: bool = False
    max_stale: float = 300.0
    workers: int = 1
    witness: tuple[str, ...] = ()
    min_witnesses: int = 1


def run(opts: MonitorOptions) -> int:
    """Watch the log at ``opts.url`` round after round (one round with ``once``)."""
    try:
        trust = _configuration(opts)
    except MonitorConfigError as err:
        raise CommandError(f"configuration error: {err}", exit_code=EXIT_CONFIG) from err
    while True:
        try:
            result = check_once(
                opts.url,
                opts.state,
                trust=trust,
                max_stale=opts.max_stale,
                workers=opts.workers,
                witnesses=list(opts.witness) or None,
                min_witnesses=opts.min_witnesses,
            )
        except (SaihmError, OSError, ValueError) as err:
            # The log could not be read (down, or answering garbage): the operator's fault.
            result = Round(
                alarms=[Alarm(AlarmKind.UNREACHABLE, f"unreachable or malformed answer: {err}")]
            )
        line: dict[str, object] = {"url": opts.url, "size": result.size, "root": result.root}
        alarms = [str(a) for a in result.alarms]
        line |= {"verified": result.verified, "alarms": alarms, "notes": result.notes}
        print(json.dumps(line), flush=True)
        for alarm in result.alarms:
            print(f"saihm monitor: ALARM: {alarm}", file=sys.stderr, flush=True)
        if opts.once:
            return 0 if result.ok else EXIT_ALARM
        time.sleep(opts.interval)
