"""``saihm monitor``: mirror a log's checkpoints and raise the alarm on rollback, fork or worse.

Each round (``check_once``): fetch ``URL/log/checkpoint``; verify its signatures with the keys
pinned in the state directory (at first contact: ``--trust KEYFILE``, else trust on first use
of ``URL/log/v1/keys``); compare it with the last mirrored checkpoint:

- smaller size: **rollback**; same size, other root (or another root for a size mirrored
  before): **fork**; larger size: fetch ``/log/v1/proof/consistency`` and check it with
  ``verify_consistency`` against both signed roots, else **inconsistent**;
- leaves served beyond the checkpoint for longer than ``--max-stale`` seconds: **stale** (the
  log stopped growing while receipts are being handed out);
- ``--spot-check N``: the newest N entries are fetched, their receipts verified against their
  holders' KEY receipts, and their inclusion under the new checkpoint proved.

A head that raised an alarm is never adopted. State directory: ``keys.txt`` (pinned verifier
keys), ``state.json`` (origin, size, root, staleSince, holders' public keys), and
``checkpoints/<size>.note`` (every mirrored signed note, usable as ``saihm verify
--checkpoint``). Network I/O is synchronous (urllib); only ``main`` sleeps.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from saihm.errors import SaihmError
from saihm.events import Operation, Receipt, verify_receipt
from saihm.helpformat import DefaultsFormatter
from saihm.translog import (
    NoteError,
    ProofError,
    leaf_hash,
    verify_checkpoint,
    verify_consistency,
    verify_inclusion,
)
from saihm.translog.witness import verify_cosignatures

__all__ = ["Round", "check_once", "main"]


@dataclass
class Round:
    """The outcome of one monitoring round."""

    size: int | None = None
    root: str | None = None
    alarms: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    spot_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.alarms


def _get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def _json(url: str) -> dict:
    return json.loads(_get(url))


class _State:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "checkpoints").mkdir(exist_ok=True)
        path = self.dir / "state.json"
        self.data: dict = json.loads(path.read_text()) if path.exists() else {}

    def keys(self) -> list[str] | None:
        path = self.dir / "keys.txt"
        if not path.exists():
            return None
        return [k.strip() for k in path.read_text().splitlines() if k.strip()]

    def pin(self, keys: list[str]) -> None:
        (self.dir / "keys.txt").write_text("".join(k + "\n" for k in keys))

    def mirrored(self, size: int) -> bytes | None:
        path = self.dir / "checkpoints" / f"{size}.note"
        return path.read_bytes() if path.exists() else None

    def save_note(self, size: int, note: bytes) -> None:
        (self.dir / "checkpoints" / f"{size}.note").write_bytes(note)

    def save(self) -> None:
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        tmp.replace(self.dir / "state.json")


def check_once(
    url: str,
    state_dir: str | Path,
    *,
    trust: list[str] | None = None,
    spot_check: int = 0,
    max_stale: float = 300.0,
    now: float | None = None,
    witnesses: list[str] | None = None,
    min_witnesses: int = 1,
) -> Round:
    """Run one monitoring round against ``url``; return its outcome (alarms, head).

    With ``witnesses`` (verifier keys), the round checks the newest witnessed checkpoint
    (``/log/checkpoint?witnessed=1``) and alarms unless ``min_witnesses`` of them cosigned it
    (:func:`saihm.translog.witness.verify_cosignatures`).
    """
    base = url.rstrip("/")
    state = _State(Path(state_dir))
    result = Round()
    clock = time.time() if now is None else now
    keys = state.keys()
    if keys is None:
        if trust:
            keys = list(trust)
        else:
            keys = [k["vkey"] for k in _json(f"{base}/log/v1/keys")["checkpointKeys"]]
            result.notes.append("keys pinned by trust on first use of /log/v1/keys")
        state.pin(keys)
    note = _get(f"{base}/log/checkpoint" + ("?witnessed=1" if witnesses else ""))
    try:
        cp = verify_checkpoint(note, keys)
    except (NoteError, SaihmError, ValueError) as err:
        result.alarms.append(f"bad signature: the checkpoint does not verify: {err}")
        return result
    if witnesses:
        try:
            verify_cosignatures(note, witnesses, min_witnesses, now=clock)
        except SaihmError as err:
            result.alarms.append(f"witnesses: {err}")
            return result
    result.size, result.root = cp.size, cp.root_hash.hex()
    last_size = state.data.get("size")
    last_root = bytes.fromhex(state.data["root"]) if "root" in state.data else None
    earlier = state.mirrored(cp.size)
    if earlier is not None and verify_checkpoint(earlier, keys).root_hash != cp.root_hash:
        result.alarms.append(f"fork: two different roots signed for size {cp.size}")
    elif last_size is not None and cp.size < last_size:
        result.alarms.append(f"rollback: checkpoint size {cp.size} < mirrored {last_size}")
    elif last_size is not None and cp.size > last_size and last_size > 0:
        try:
            proof_url = f"{base}/log/v1/proof/consistency?first={last_size}&second={cp.size}"
            proof = [bytes.fromhex(h) for h in _json(proof_url)["proof"]]
            verify_consistency(last_size, cp.size, proof, last_root, cp.root_hash)
        except (ProofError, ValueError, KeyError, urllib.error.URLError) as err:
            result.alarms.append(
                f"inconsistent: no valid consistency proof {last_size} -> {cp.size}: {err}"
            )
    if witnesses and last_size is not None and cp.size > last_size:
        # The witnessed head trails a busy log by a moment; it is stale only if it stops.
        state.data.pop("staleSince", None)
    _check_staleness(base, cp.size, state, clock, max_stale, result)
    if result.ok and spot_check > 0 and cp.size > 0:
        _spot_check(base, cp.size, cp.root_hash, spot_check, state, result)
    if result.ok:
        state.save_note(cp.size, note)
        state.data.update({"origin": cp.origin, "size": cp.size, "root": cp.root_hash.hex(),
                           "updated": clock})  # fmt: skip
    state.save()
    return result


def _check_staleness(
    base: str, size: int, state: _State, clock: float, max_stale: float, result: Round
) -> None:
    """Leaves beyond the signed size mean receipts exist that no checkpoint covers yet."""
    try:
        _get(f"{base}/log/v1/entries?start={size}&end={size + 1}")
        beyond = True
    except urllib.error.HTTPError:
        beyond = False
    if not beyond:
        state.data.pop("staleSince", None)
        return
    since = state.data.setdefault("staleSince", clock)
    if clock - since > max_stale:
        result.alarms.append(
            f"stale: entries beyond checkpoint size {size} for {clock - since:.0f} s"
        )


def _holder_key(base: str, holder: bytes, state: _State) -> bytes:
    holders = state.data.setdefault("holders", {})
    if holder.hex() in holders:
        return base64.b64decode(holders[holder.hex()])
    page = _json(f"{base}/log/v1/receipts?holderId={holder.hex()}")
    for item in page["receipts"]:
        receipt = Receipt.from_cbor(base64.b64decode(item["cbor"]))
        if receipt.operation == Operation.KEY and receipt.holder_id == holder:
            key = receipt.public_key
            verify_receipt(receipt, key)
            holders[holder.hex()] = base64.b64encode(key).decode()
            return key
    raise ValueError(f"holder {holder.hex()} has no KEY receipt")


def _spot_check(base: str, size: int, root: bytes, n: int, state: _State, result: Round) -> None:
    """Verify the newest ``n`` entries (at most 1000): signatures and inclusion under ``root``."""
    start = max(0, size - min(n, 1000))
    entries = _json(f"{base}/log/v1/entries?start={start}&end={size}")["entries"]
    for entry in entries:
        index, leaf = entry["index"], base64.b64decode(entry["leaf"])
        try:
            receipt = Receipt.from_cbor(leaf)
            key = (
                receipt.public_key
                if receipt.operation == Operation.KEY
                else _holder_key(base, receipt.holder_id, state)
            )
            verify_receipt(receipt, key)
            proof_url = f"{base}/log/v1/proof/inclusion?index={index}&size={size}"
            proof = [bytes.fromhex(h) for h in _json(proof_url)["proof"]]
            verify_inclusion(leaf_hash(leaf), index, size, proof, root)
        except (SaihmError, ValueError, KeyError, urllib.error.URLError) as err:
            result.alarms.append(f"entry {index}: spot check failed: {err}")
            return
        result.spot_checked += 1


#: Exit codes of ``saihm monitor --once``: the log's fault (an alarm) is 1; the monitor's own
#: bad configuration (URL, --trust file, state directory) is 2 and contacts nobody.
EXIT_ALARM = 1
EXIT_CONFIG = 2


class MonitorConfigError(SaihmError):
    """The monitor's own configuration is unusable: not the operator's fault."""


def _configuration(opts: argparse.Namespace) -> list[str] | None:
    """Check what the monitor itself was given before contacting anyone; return the keys of
    ``--trust``. Raises :class:`MonitorConfigError` naming the problem."""
    from urllib.parse import urlsplit

    parts = urlsplit(opts.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MonitorConfigError(f"URL must be http(s)://HOST[:PORT], not {opts.url!r}")
    if opts.interval <= 0 or opts.spot_check < 0 or opts.max_stale < 0:
        raise MonitorConfigError("--interval must be positive; --spot-check and --max-stale >= 0")
    state = Path(opts.state)
    try:
        state.mkdir(parents=True, exist_ok=True)
        probe = state / ".writable"
        probe.write_bytes(b"")
        probe.unlink()
        pinned = state / "keys.txt"
        keys_text = pinned.read_text() if pinned.exists() else None
        saved = state / "state.json"
        if saved.exists():
            json.loads(saved.read_text())
    except OSError as err:
        raise MonitorConfigError(f"state directory {state}: {err.strerror or err}") from err
    except ValueError as err:
        raise MonitorConfigError(f"state directory {state}: state.json is corrupt") from err
    if keys_text is not None:
        _check_keys(keys_text.splitlines(), f"{state / 'keys.txt'}")
    if not opts.trust:
        return None
    try:
        lines = Path(opts.trust).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise MonitorConfigError(f"--trust {opts.trust}: cannot read it") from err
    return _check_keys(lines, f"--trust {opts.trust}")


def _check_keys(lines: list[str], where: str) -> list[str]:
    from saihm.translog.checkpoint import verifier_from_key

    keys = [k.strip() for k in lines if k.strip() and not k.startswith("#")]
    if not keys:
        raise MonitorConfigError(f"{where}: holds no verifier key")
    for key in keys:
        try:
            verifier_from_key(key)
        except (SaihmError, ValueError) as err:
            raise MonitorConfigError(f"{where}: not a verifier key: {key[:40]!r}") from err
    return keys


def main(argv: list[str]) -> int:
    """``saihm monitor URL --state DIR [--interval S] [--once] [--spot-check N] ...``."""
    parser = argparse.ArgumentParser(
        prog="saihm monitor",
        formatter_class=DefaultsFormatter,
        description="Mirror a SAIHM log's checkpoints; alarm on rollback, fork, inconsistent "
        "proof, bad signature or a stale log. With --once, exit 1 on any alarm.",
    )
    parser.add_argument("url", help="the operator's base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--state", required=True, help="state directory (pinned keys, heads)")
    parser.add_argument("--trust", help="pin these verifier keys at first contact (file)")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between rounds")
    parser.add_argument("--once", action="store_true", help="one round; exit 1 on any alarm")
    parser.add_argument("--spot-check", type=int, default=0, metavar="N",
                        help="verify the newest N entries and their inclusion")  # fmt: skip
    parser.add_argument("--max-stale", type=float, default=300.0, metavar="S",
                        help="alarm when leaves stay beyond the checkpoint this long")  # fmt: skip
    from saihm.audit.cli import add_witness_options, witness_policy

    add_witness_options(parser)
    opts = parser.parse_args(argv)
    need = witness_policy(parser, opts)
    try:
        trust = _configuration(opts)
    except MonitorConfigError as err:
        print(f"saihm monitor: configuration error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    while True:
        try:
            result = check_once(opts.url, opts.state, trust=trust, spot_check=opts.spot_check,
                                max_stale=opts.max_stale, witnesses=opts.witness or None,
                                min_witnesses=need)  # fmt: skip
        except (urllib.error.URLError, OSError, ValueError) as err:
            result = Round(alarms=[f"unreachable or malformed answer: {err}"])
        print(json.dumps({"url": opts.url, "size": result.size, "root": result.root,
                          "spotChecked": result.spot_checked, "alarms": result.alarms,
                          "notes": result.notes}), flush=True)  # fmt: skip
        for alarm in result.alarms:
            print(f"saihm monitor: ALARM: {alarm}", file=sys.stderr, flush=True)
        if opts.once:
            return 0 if result.ok else EXIT_ALARM
        time.sleep(opts.interval)
