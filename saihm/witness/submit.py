"""The operator's side of c2sp.org/tlog-witness: submit each new checkpoint to the witnesses
it is configured with, and keep the cosignatures they return.

One :class:`Submitter` runs per data directory (the serving worker that holds
``<data>/witness-submit.lock``), as a background task beside the HTTP server: it never runs in
a request and never holds a store transaction while it waits on the network, so a witness
that is slow or down delays nothing but its own cosignatures. Each witness has its own loop:

1. read the newest checkpoint; if this witness has cosigned it already, wait;
2. ``POST <url>/add-checkpoint`` with ``old <size>`` = the size this witness last cosigned
   (0 when unknown), the RFC 6962 consistency proof from there and the checkpoint with the
   log's own signature lines only (other witnesses' cosignatures are not the witness's
   business, and a few ML-DSA-44 lines would exceed the 10 KiB request limit of some
   witnesses); on ``409`` with a ``text/x.tlog.size`` body, retry once from the size the
   witness names;
3. verify the returned lines with the witness's key(s) (lines of other keys are ignored, as
   the spec requires), and append them to the stored checkpoint note
   (:meth:`saihm.store.Store.add_cosignatures`), so ``GET /log/checkpoint`` serves them;
4. on any failure (timeout, refusal, bad answer) back off exponentially, from
   :data:`INTERVAL` up to :data:`MAX_BACKOFF` seconds, and try again.

A witness may be configured with both of its keys (one ``URL=VKEY`` each: an Ed25519
``cosignature/v1`` key and an ML-DSA-44 one, same name and URL); it is still one witness, with
one loop, one status and one request per checkpoint, and a line of either key counts.

The status of every witness (last success, last error, the size it cosigned) is kept in
``<data>/witness-status.json`` for health checks and for the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import aiohttp

from saihm.errors import SaihmError
from saihm.translog import Checkpoint, NoteError
from saihm.translog.note import Verifier, parse_note
from saihm.translog.witness import (
    WitnessEndpoint,
    add_checkpoint_body,
    parse_cosignature_lines,
    parse_witness,
    parse_witnesses,
)

if TYPE_CHECKING:
    from saihm.config import Config

__all__ = [
    "INTERVAL",
    "MAX_BACKOFF",
    "TIMEOUT",
    "LogSource",
    "Submitter",
    "WitnessEndpoint",
    "WitnessStatus",
    "for_config",
    "log_signed",
    "parse_witness",
    "parse_witnesses",
]

log = logging.getLogger("saihm.witness")

#: Seconds between looks at the newest checkpoint, and the first back-off step.
INTERVAL = 1.0
#: The longest back-off after repeated failures (seconds): a failing witness is retried at
#: least every five minutes, like the store's background jobs.
MAX_BACKOFF = 300.0
#: Timeout of one add-checkpoint request (seconds).
TIMEOUT = 10.0
#: Largest response body read from a witness.
MAX_RESPONSE = 64 * 1024
STATUS_FILE = "witness-status.json"
#: Seconds between rewrites of the status file when only ``lastCurrent`` moved.
STATUS_REFRESH = 30.0
LOCK_FILE = "witness-submit.lock"


class WitnessError(SaihmError):
    """A witness that did not cosign (down, refused, or answered nonsense)."""

    code = "witness_failed"


def log_signed(note: bytes) -> bytes:
    """``note`` (a signed checkpoint) with only the log's own signature lines, those under the
    checkpoint's origin (saihm's log keys are named after it, docs/formats.md §2): the
    cosignature lines the log has collected are dropped. Raises ``NoteError``."""
    text, signatures = parse_note(note)
    origin = Checkpoint.parse(text).origin
    lines = note[len(text) + 1 :].split(b"\n")[:-1]
    kept = [line + b"\n" for line, sig in zip(lines, signatures, strict=True) if sig.name == origin]
    if not kept:
        raise NoteError("the checkpoint carries no signature of its log")
    return text + b"\n" + b"".join(kept)


@dataclass
class WitnessStatus:
    """What is known of one witness (``witness-status.json``; no secrets)."""

    name: str
    url: str
    cosigned_size: int | None = None
    witness_size: int | None = None
    last_success: float | None = None
    #: When the newest checkpoint was last seen carrying this witness's cosignature: recent
    #: means the witness is keeping up, however long ago the log last grew.
    last_current: float | None = None
    last_attempt: float | None = None
    last_error: str | None = None
    failures: int = 0


class LogSource(Protocol):
    """What the submitter needs of the store."""

    def latest_checkpoint(self) -> bytes: ...

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]: ...

    def add_cosignatures(self, size: int, lines: Sequence[bytes]) -> bytes: ...


class Submitter:
    """Background submission of checkpoints to witnesses (module docstring)."""

    def __init__(
        self,
        source: LogSource,
        endpoints: Sequence[WitnessEndpoint],
        data_dir: Path,
        *,
        interval: float = INTERVAL,
        max_backoff: float = MAX_BACKOFF,
        timeout: float = TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.endpoints = parse_witnesses([e.spec for e in endpoints])
        #: The configured keys of each witness (one or two), by witness name.
        self.keys: dict[str, list[Verifier]] = {}
        for endpoint in self.endpoints:
            self.keys.setdefault(endpoint.name, []).append(endpoint.verifier)
        first = {e.name: e for e in reversed(self.endpoints)}
        self.data_dir = data_dir
        self.interval = interval
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.clock = clock
        self.status = {name: WitnessStatus(name, first[name].url) for name in self.keys}
        self._loops = [first[name] for name in self.keys]
        self._load_status()
        self._stop = asyncio.Event()
        self._lock_fd: int | None = None
        self._saved: dict[str, dict] | None = None
        self._saved_at = 0.0

    # -- status ---------------------------------------------------------------------------

    def _load_status(self) -> None:
        path = self.data_dir / STATUS_FILE
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        if not isinstance(saved, dict):
            return
        for name, status in self.status.items():
            old = saved.get(name)
            if isinstance(old, dict) and old.get("url") == status.url:
                size = old.get("witnessSize")
                if isinstance(size, int) and size >= 0:
                    status.witness_size = size
                    status.cosigned_size = old.get("cosignedSize")

    def snapshot(self) -> dict[str, dict]:
        """Every witness's status, JSON-ready (camelCase keys)."""
        out = {}
        for name, status in self.status.items():
            d = asdict(status)
            out[name] = {
                "url": d["url"],
                "cosignedSize": d["cosigned_size"],
                "witnessSize": d["witness_size"],
                "lastSuccess": d["last_success"],
                "lastCurrent": d["last_current"],
                "lastAttempt": d["last_attempt"],
                "lastError": d["last_error"],
                "failures": d["failures"],
            }
        return out

    def _save_status(self) -> None:
        """Write the status file when it changed, or every :data:`STATUS_REFRESH` seconds while
        only ``lastCurrent`` moves (atomically: written beside, then renamed)."""
        snapshot = self.snapshot()
        steady = {name: {**st, "lastCurrent": None} for name, st in snapshot.items()}
        if steady == self._saved and self.clock() - self._saved_at < STATUS_REFRESH:
            return
        self._saved, self._saved_at = steady, self.clock()
        path = self.data_dir / STATUS_FILE
        tmp = path.with_name(f".{STATUS_FILE}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(snapshot, indent=1, sort_keys=True))
            tmp.replace(path)
        except OSError:
            log.warning("cannot write %s", path)

    # -- running --------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask every loop to end."""
        self._stop.set()

    def _try_lock(self) -> bool:
        """Become this data directory's one submitter (other workers wait for the lock)."""
        if self._lock_fd is not None:
            return True
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def run(self) -> None:
        """Run until :meth:`stop`: wait for the submitter lock, then one loop per witness."""
        while not self._stop.is_set():
            try:
                if self._try_lock():
                    break
            except OSError as err:
                log.warning("cannot open %s: %s", LOCK_FILE, err.strerror)
            await self._sleep(5 * self.interval)
        if self._stop.is_set():
            return
        try:
            async with aiohttp.ClientSession() as session:
                await asyncio.gather(*(self._loop(session, e) for e in self._loops))
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    async def _loop(self, session: aiohttp.ClientSession, endpoint: WitnessEndpoint) -> None:
        status = self.status[endpoint.name]
        while not self._stop.is_set():
            delay = self.interval
            try:
                await self.submit_once(session, endpoint)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                # Every failure, expected or not, only delays this witness's next attempt.
                status.failures += 1
                status.last_error = (
                    str(err) if isinstance(err, SaihmError) else f"{type(err).__name__}"
                )
                delay = min(self.max_backoff, self.interval * 2 ** min(status.failures, 20))
                log.warning(
                    "witness %s: %s (next try in %.0f s)", endpoint.name, status.last_error, delay
                )
            self._save_status()
            await self._sleep(delay)

    async def submit_once(self, session: aiohttp.ClientSession, endpoint: WitnessEndpoint) -> bool:
        """Submit the newest checkpoint to the witness of ``endpoint`` unless it cosigned it
        already (a line of any of its configured keys); store the cosignature(s). Returns True
        if a cosignature was added. Raises :class:`WitnessError`.
        """
        status = self.status[endpoint.name]
        note = await asyncio.to_thread(self.source.latest_checkpoint)
        text, signatures = parse_note(note)
        checkpoint = Checkpoint.parse(text)
        mine = {(v.name, v.key_id) for v in self.keys[endpoint.name]}
        if any((s.name, s.key_id) in mine for s in signatures):
            status.last_current = self.clock()
            return False
        status.last_attempt = self.clock()
        lines = await self._add_checkpoint(session, endpoint, status, log_signed(note), checkpoint)
        await asyncio.to_thread(self.source.add_cosignatures, checkpoint.size, lines)
        status.cosigned_size = status.witness_size = checkpoint.size
        status.last_success = status.last_current = self.clock()
        status.last_error = None
        status.failures = 0
        return True

    async def _add_checkpoint(
        self,
        session: aiohttp.ClientSession,
        endpoint: WitnessEndpoint,
        status: WitnessStatus,
        note: bytes,
        checkpoint: Checkpoint,
    ) -> list[bytes]:
        old = status.witness_size or 0
        for _ in range(3):
            if old > checkpoint.size:
                raise WitnessError(
                    f"the witness has cosigned size {old}, larger than this log's "
                    f"{checkpoint.size}: the log was rolled back or forked"
                )
            proof: list[bytes] = []
            if 0 < old < checkpoint.size:
                proof = await asyncio.to_thread(self.source.consistency_proof, old, checkpoint.size)
            body = add_checkpoint_body(old, proof, note)
            try:
                async with session.post(
                    f"{endpoint.url}/add-checkpoint",
                    data=body,
                    timeout=aiohttp.ClientTimeout(total=self.timeout),
                    headers={"Content-Type": "text/plain; charset=utf-8"},
                ) as response:
                    answer = await response.content.read(MAX_RESPONSE + 1)
                    kind = response.content_type
                    code = response.status
            except (aiohttp.ClientError, TimeoutError) as err:
                raise WitnessError(f"unreachable: {type(err).__name__}") from err
            if len(answer) > MAX_RESPONSE:
                raise WitnessError("response too large")
            if code == 200:
                return self._check_lines(self.keys[endpoint.name], checkpoint, answer)
            if code == 409 and kind == "text/x.tlog.size":
                size = _size(answer)
                status.witness_size = size
                if size == old:
                    raise WitnessError(f"the witness holds another root for size {size}: a fork")
                old = size
                continue
            raise WitnessError(f"refused with HTTP {code}")
        raise WitnessError("the witness's size kept changing")

    @staticmethod
    def _check_lines(
        verifiers: Sequence[Verifier], checkpoint: Checkpoint, answer: bytes
    ) -> list[bytes]:
        """The lines of ``answer`` made by the witness's configured key(s), each verified;
        others dropped."""
        try:
            lines = parse_cosignature_lines(answer)
        except NoteError as err:
            raise WitnessError(f"malformed cosignature response: {err}") from err
        known = {(v.name, v.key_id): v for v in verifiers}
        kept = []
        for line in lines:
            (sig,) = parse_note(b"x\n\n" + line)[1]
            verifier = known.get((sig.name, sig.key_id))
            if verifier is None:
                continue
            try:
                verifier.verify(checkpoint.body(), sig.signature)
            except NoteError as err:
                raise WitnessError(f"invalid cosignature: {err}") from err
            kept.append(line)
        if not kept:
            raise WitnessError("no cosignature from the configured key")
        return kept


def _size(body: bytes) -> int:
    text = body.decode("ascii", "replace")
    if not text.endswith("\n") or not text[:-1].isdigit() or len(text) > 21:
        raise WitnessError("malformed text/x.tlog.size body")
    if text[:-1] != str(int(text[:-1])):
        raise WitnessError("malformed text/x.tlog.size body")
    return int(text[:-1])


def for_config(source: LogSource, config: Config) -> Submitter | None:
    """The submitter of ``config.witnesses`` over ``source`` (the operator's store), or None
    when no witness is configured: what ``saihm serve`` hands to each worker's app
    (:func:`saihm.http.app.create_app`)."""
    if not config.witnesses:
        return None
    return Submitter(source, parse_witnesses(config.witnesses), config.data_dir)
