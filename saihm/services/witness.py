"""``saihm witness serve``: a transparency log witness per c2sp.org/tlog-witness.

``POST /add-checkpoint`` takes ``old <size>``, a consistency proof, an empty line and a signed
checkpoint, and answers as the spec says, in the spec's order:

- 400 for a body that does not parse, or an old size above the checkpoint size;
- 404 for a checkpoint whose origin is not one of the configured logs;
- 403 when no signature verifies under the log's configured keys (and when a configured key's
  signature is invalid);
- 409 with body ``<size>\\n`` and ``Content-Type: text/x.tlog.size`` when the old size is not the
  size of the latest checkpoint cosigned for that origin, and when the sizes match but the roots
  differ (a fork);
- 422 when the consistency proof does not verify (a fork, or a bad proof);
- 503 when the state cannot be written (a full disk), with nothing cosigned;
- 200 with the witness's cosignature lines otherwise, after the new head is on disk: an Ed25519
  ``cosignature/v1`` line (type 0x04) and, when the key file holds one, an ML-DSA-44
  ``subtree/v1`` line (type 0x06), both under the witness's name.

Evidence: a refusal that shows a genuine conflict with a checkpoint the log validly signed is
kept in the state directory (:meth:`WitnessState.record_evidence`) and logged on stderr as an
incident: the same size with another root (409 ``root_mismatch``), or a well-formed
consistency proof (the right number of hashes for the two sizes) that does not verify between
the witness's size and a larger one (422). Only the request's old size, proof, checkpoint text
and the log's own verified signature lines are kept (other lines are ignored, as the spec
says), once per checkpoint text, within a bound in bytes and records; past it the evidence is
counted and logged, not kept. Cosigning a checkpoint later deletes its record (the proof was
wrong, not the log: :meth:`WitnessState.advance`). A malformed request (a proof where none
belongs, a proof of the wrong length, bad base64, a wrong hash length, too many or malformed
signature lines) is refused and leaves nothing behind. Incident lines are rate-limited
(:class:`IncidentLog`).

Errors other than 409 are ``{"error": code}`` JSON, as everywhere in saihm.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from saihm.errors import MalformedInput, SaihmError
from saihm.http.common import answered
from saihm.storage.base import StorageError
from saihm.translog import Checkpoint, NoteError, ProofError, verify_consistency
from saihm.translog.checkpoint import verifier_from_key
from saihm.translog.note import NoteSignature, Verifier, open_note
from saihm.translog.verify import RootMismatchError
from saihm.translog.witness import (
    CosignatureV1Signer,
    SubtreeV1Signer,
    add_checkpoint_body,
    parse_add_checkpoint,
)
from saihm.witness.state import Head, WitnessState

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

__all__ = [
    "IncidentLog",
    "Witness",
    "WitnessOptions",
    "create_witness_app",
    "load_keys",
    "load_or_create_key",
    "serve",
]

KEY_FILE = "witness.key"
VKEY_FILE = "witness.vkey"
SIZE_TYPE = "text/x.tlog.size"
#: A checkpoint with both saihm signatures is about 3.5 KB, a 63-line proof 2.8 KB.
MAX_BODY = 64 * 1024

WITNESS: web.AppKey[Witness] = web.AppKey("saihm.witness")


class Refused(Exception):
    """A request the witness answers with a 4xx status other than 200; ``conflict`` when it
    shows a genuine conflict with a validly signed checkpoint (kept as evidence)."""

    def __init__(
        self, status: int, code: str, size: int | None = None, *, conflict: bool = False
    ) -> None:
        super().__init__(code)
        self.status, self.code, self.size, self.conflict = status, code, size, conflict

    def response(self) -> web.Response:
        if self.size is not None:
            return web.Response(
                status=self.status, body=f"{self.size}\n".encode(), content_type=SIZE_TYPE
            )
        return web.json_response({"error": self.code}, status=self.status)


class IncidentLog:
    """Incident lines on stderr, at most ``burst`` per ``window`` seconds: the lines past that
    are counted and the count is given on the next line that is printed, so a flood of
    conflicting requests cannot flood the log (the evidence store and its ``dropped`` count
    keep what the lines leave out)."""

    def __init__(
        self,
        *,
        burst: int = 10,
        window: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        write: Callable[[str], None] | None = None,
    ) -> None:
        self.burst, self.window, self.clock = burst, window, clock
        self._write = write
        self._start = -window
        self._printed = 0
        self.suppressed = 0

    def __call__(self, line: str) -> bool:
        """Print ``line`` unless over the rate; return whether it was printed."""
        now = self.clock()
        if now - self._start >= self.window:
            self._start, self._printed = now, 0
        if self._printed >= self.burst:
            self.suppressed += 1
            return False
        self._printed += 1
        if self.suppressed:
            line += f" ({self.suppressed} similar lines suppressed before this one)"
            self.suppressed = 0
        if self._write is not None:
            self._write(line)
        else:
            print(line, file=sys.stderr, flush=True)
        return True


class Witness:
    """The witness's logic over its state, key and configured logs (no HTTP in here)."""

    def __init__(
        self,
        state: WitnessState,
        signer: CosignatureV1Signer,
        log_keys: Sequence[str],
        *,
        mldsa44: SubtreeV1Signer | None = None,
        incidents: IncidentLog | None = None,
    ) -> None:
        self.state = state
        self.signer = signer
        self.incidents = IncidentLog() if incidents is None else incidents
        self.signers: list[CosignatureV1Signer | SubtreeV1Signer] = [signer]
        if mldsa44 is not None:
            if mldsa44.name != signer.name:
                raise MalformedInput("the witness's two keys must have the same name")
            self.signers.append(mldsa44)
        self.logs: dict[str, list[Verifier]] = {}
        for vkey in log_keys:
            verifier = verifier_from_key(vkey)
            self.logs.setdefault(verifier.name, []).append(verifier)

    def add_checkpoint(self, body: bytes) -> bytes:
        """Handle one ``add-checkpoint`` body; return the cosignature line(s) or raise
        :class:`Refused` with the status c2sp.org/tlog-witness prescribes."""
        try:
            request = parse_add_checkpoint(body)
            text = request.note[: request.note.rindex(b"\n\n") + 1]
            checkpoint = Checkpoint.parse(text)
        except (MalformedInput, NoteError, ValueError) as err:
            raise Refused(400, "bad_request") from err
        verifiers = self.logs.get(checkpoint.origin)
        if verifiers is None:
            raise Refused(404, "unknown_origin")
        try:
            _, signed = open_note(request.note, verifiers)
        except NoteError as err:
            raise Refused(403, "bad_signature") from err
        if request.old_size > checkpoint.size:
            raise Refused(400, "old_size_above_size")
        lines: list[bytes] = []

        def decide(head: Head | None) -> Head:
            current = 0 if head is None else head.size
            if request.old_size != current:
                raise Refused(409, "size_mismatch", size=current)
            if request.old_size == 0 or request.old_size == checkpoint.size:
                if request.proof:
                    # A proof where none can exist is malformed, not a sign of a fork.
                    raise Refused(422, "bad_consistency_proof")
                if (
                    head is not None
                    and head.size == checkpoint.size
                    and head.root_hash != checkpoint.root_hash
                ):
                    raise Refused(409, "root_mismatch", size=current, conflict=True)
            else:
                assert head is not None  # current > 0 means a head is stored
                try:
                    verify_consistency(
                        head.size,
                        checkpoint.size,
                        list(request.proof),
                        head.root_hash,
                        checkpoint.root_hash,
                    )
                except RootMismatchError as err:
                    # A proof of the right shape that does not join the two roots.
                    raise Refused(422, "bad_consistency_proof", conflict=True) from err
                except ProofError as err:
                    raise Refused(422, "bad_consistency_proof") from err
            # Cosign inside the transaction, so the statement "this is the largest consistent
            # tree I have seen" is true at the time it is stamped.
            stamp = int(time.time())
            lines.extend(signer.cosign(text, stamp) for signer in self.signers)
            return Head(checkpoint.origin, checkpoint.size, checkpoint.root_hash)

        try:
            self.state.advance(checkpoint.origin, decide, checkpoint_text=text)
        except Refused as refusal:
            if refusal.conflict:
                record = add_checkpoint_body(
                    request.old_size, request.proof, _log_signed_note(text, signed)
                )
                self._keep_evidence(checkpoint, text, record, refusal.code)
            raise
        return b"".join(lines)

    def _keep_evidence(self, checkpoint: Checkpoint, text: bytes, record: bytes, code: str) -> None:
        """Store one conflict's evidence and say so on stderr (rate-limited); a state that
        cannot be written loses this record, says so, and the refusal still stands."""
        what = f"{checkpoint.origin} size {checkpoint.size}: {code}"
        try:
            outcome = self.state.record_evidence(text, record)
        except StorageError as err:
            self.incidents(
                f"saihm witness: INCIDENT: refused {what}; evidence NOT kept, the state "
                f"cannot be written ({type(err).__name__})"
            )
            return
        if outcome == "duplicate":
            return  # this checkpoint's conflict is on record and was reported already
        usage = self.state.evidence_usage()
        if outcome == "kept":
            self.incidents(
                f"saihm witness: INCIDENT: refused {what}; kept as evidence "
                f"({usage.records} records, {usage.bytes} bytes)"
            )
        else:
            self.incidents(
                f"saihm witness: INCIDENT: refused {what}; evidence NOT kept, the evidence "
                f"store is full ({usage.records} records, {usage.bytes} of {usage.max_bytes} "
                f"bytes; {usage.dropped} not kept so far)"
            )


def _log_signed_note(text: bytes, signed: Sequence[NoteSignature]) -> bytes:
    """The checkpoint note with only the signature lines that verified under the log's keys."""
    lines = [
        f"\u2014 {sig.name} ".encode() + base64.b64encode(sig.key_id + sig.signature) + b"\n"
        for sig in signed
    ]
    return text + b"\n" + b"".join(lines)


async def _add_checkpoint(request: web.Request) -> web.Response:
    if request.content_length is not None and request.content_length > MAX_BODY:
        return web.json_response({"error": "too_large"}, status=413)
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return web.json_response({"error": "too_large"}, status=413)
    witness = request.app[WITNESS]
    try:
        lines = await asyncio.to_thread(witness.add_checkpoint, body)
    except Refused as refusal:
        return refusal.response()
    except StorageError as err:
        # A full disk or map: nothing was stored and nothing is cosigned; the log retries.
        print(f"saihm witness: state unavailable ({type(err).__name__})", file=sys.stderr)
        return web.json_response({"error": "witness_storage_unavailable"}, status=503)
    return web.Response(body=lines, content_type="text/plain", charset="utf-8")


@web.middleware
async def _access_log(request: web.Request, handler: Handler) -> web.StreamResponse:
    """One JSON line per request on stderr: time, method, path, status, ms (no bodies); the
    status the client got (:func:`saihm.http.common.answered`)."""

    def write(status: int, seconds: float) -> None:
        line = {
            "time": round(time.time(), 3),
            "method": request.method[:16],
            "path": request.rel_url.path[:200],
            "status": status,
            "ms": round(seconds * 1000, 3),
        }
        print(json.dumps(line), file=sys.stderr, flush=True)

    return await answered(request, handler, write)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as err:
        if err.status < 400:
            raise
        return web.json_response(
            {"error": "not_found" if err.status == 404 else "bad_request"}, status=err.status
        )
    except asyncio.CancelledError:
        raise
    except Exception as err:
        print(f"saihm witness: internal error ({type(err).__name__})", file=sys.stderr)
        return web.json_response({"error": "internal"}, status=500)


def create_witness_app(witness: Witness) -> web.Application:
    """The witness's aiohttp application: ``POST /add-checkpoint`` only."""
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_access_log, _errors])
    app[WITNESS] = witness
    app.router.add_post("/add-checkpoint", _add_checkpoint)
    return app


def load_keys(path: Path) -> tuple[CosignatureV1Signer, SubtreeV1Signer | None]:
    """Read a witness key file: an Ed25519 ``cosignature/v1`` key line, then optionally an
    ML-DSA-44 ``subtree/v1`` key line under the same name. Raises ``NoteError``."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    if not 1 <= len(lines) <= 2:
        raise NoteError(f"{path} must hold one or two private key lines")
    ed25519 = CosignatureV1Signer.from_skey(lines[0])
    mldsa44 = SubtreeV1Signer.from_skey(lines[1]) if len(lines) == 2 else None
    if mldsa44 is not None and mldsa44.name != ed25519.name:
        raise NoteError(f"the keys in {path} have different names")
    return ed25519, mldsa44


def load_or_create_key(path: Path, name: str | None) -> tuple[CosignatureV1Signer, bool]:
    """Read the witness key at ``path``, or create it (mode 0600, never overwritten) under
    ``name`` (default ``witness.localhost/<first 8 hex of SHA-256 of the Ed25519 key>``):
    an Ed25519 key and an ML-DSA-44 key (:func:`load_keys`).

    Returns (the Ed25519 signer, created). Raises ``MalformedInput`` if ``name`` differs from
    the name of an existing key, ``NoteError`` for a malformed key file.
    """
    if path.exists():
        signer, _ = load_keys(path)
        if name is not None and name != signer.name:
            raise MalformedInput(f"the witness key at {path} is named {signer.name}, not {name}")
        return signer, False
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    if name is None:
        digest = hashlib.sha256(private.public_key().public_bytes_raw()).hexdigest()
        name = f"witness.localhost/{digest[:8]}"
    signer = CosignatureV1Signer(name, private)
    mldsa44 = SubtreeV1Signer.generate(name)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(signer.skey() + "\n" + mldsa44.skey() + "\n")
        f.flush()
        os.fsync(f.fileno())
    return signer, True


@dataclass(frozen=True)
class WitnessOptions:
    """``saihm witness serve`` (parsed in saihm.commands.witness)."""

    state: str
    key: str | None = None
    name: str | None = None
    log: tuple[str, ...] = ()
    logs_file: str | None = None
    host: str = "127.0.0.1"
    port: int = 7380
    tls_cert: str | None = None
    tls_key: str | None = None


def _log_keys(opts: WitnessOptions) -> list[str]:
    keys = list(opts.log)
    if opts.logs_file:
        lines = Path(opts.logs_file).read_text().splitlines()
        keys += [k.strip() for k in lines if k.strip() and not k.startswith("#")]
    if not keys:
        raise MalformedInput("give at least one --log VKEY or --logs-file FILE")
    for key in keys:
        try:
            verifier_from_key(key)
        except NoteError as err:
            raise MalformedInput(f"bad log verifier key: {err}") from err
    return keys


def _check_listen(opts: WitnessOptions) -> bool:
    """Plain HTTP only on the loopback, as for ``saihm serve``; return True for TLS."""
    from saihm.http.listen import LOOPBACK

    tls = bool(opts.tls_cert or opts.tls_key)
    if tls and not (opts.tls_cert and opts.tls_key):
        raise MalformedInput("give both --tls-cert and --tls-key")
    if not tls and opts.host not in LOOPBACK:
        raise MalformedInput(f"refusing plain http on {opts.host}: give --tls-cert and --tls-key")
    if not 0 <= opts.port <= 65535:
        raise MalformedInput("--port must be 0..65535")
    return tls


async def _run(witness: Witness, opts: WitnessOptions) -> None:
    from saihm.http.listen import bind, tls_context

    tls = _check_listen(opts)
    context = tls_context(opts.tls_cert, opts.tls_key) if opts.tls_cert and opts.tls_key else None
    sock = bind(opts.host, opts.port)
    runner = web.AppRunner(create_witness_app(witness), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.SockSite(runner, sock, ssl_context=context).start()
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        print(
            f"saihm witness: serving {'https' if tls else 'http'}://{shown}:{port}/ "
            f"for {', '.join(sorted(witness.logs))}",
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()
        sock.close()


def serve(opts: WitnessOptions) -> int:
    """Run the witness until SIGTERM or SIGINT; returns the exit status."""
    state_dir = Path(opts.state)
    try:
        keys = _log_keys(opts)
        _check_listen(opts)
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        key_path = Path(opts.key or state_dir / KEY_FILE)
        signer, created = load_or_create_key(key_path, opts.name)
        _, mldsa44 = load_keys(key_path)
        vkeys = [signer.vkey()] + ([mldsa44.vkey()] if mldsa44 else [])
        (state_dir / VKEY_FILE).write_text("".join(k + "\n" for k in vkeys))
        state = WitnessState(state_dir)
    except OSError as err:
        # A startup error (bad keys, options, state directory) raises; the command line's one
        # printer (saihm/commands/main.py) prints it as one line, exit 2.
        raise SaihmError(f"{err.strerror or type(err).__name__}: {err.filename or ''}") from err
    print(
        f"saihm witness: {'created' if created else 'using'} key {signer.name}; verifier keys "
        f"(Ed25519 cosignature/v1, then ML-DSA-44 subtree/v1):\n" + "\n".join(vkeys),
        flush=True,
    )
    usage = state.evidence_usage()
    if usage.records or usage.dropped:
        print(
            f"saihm witness: evidence of log conflicts in {state_dir}: {usage.records} records, "
            f"{usage.bytes} of {usage.max_bytes} bytes; {usage.dropped} not kept (store full)",
            file=sys.stderr,
            flush=True,
        )
    try:
        asyncio.run(_run(Witness(state, signer, keys, mldsa44=mldsa44), opts))
    except OSError as err:
        raise SaihmError(f"cannot listen on {opts.host}:{opts.port}: {err.strerror}") from err
    finally:
        state.close()
    return 0
