"""A real ``saihm serve`` and a real ``saihm witness serve`` on the loopback: the operator's
checkpoints come back cosigned and verify; ``saihm verify`` and ``saihm monitor`` count
witnesses; a rolled-back and a forked log are refused by the witness and caught by the
monitor."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from saihm.translog import verify_checkpoint
from saihm.translog.witness import CosignatureV1Signer, verify_cosignatures
from tests.support.cli import run_saihm
from tests.support.serve import SAIHM, fetch, free_port, holder_create, serving

ORIGIN = "e2e.example/log"
DEADLINE = 60


@contextmanager
def witness_serving(tmp: Path, data: Path, *, pq: bool = False) -> Iterator[tuple[str, str]]:
    """``saihm witness serve`` for ``data``'s log; yields (URL, verifier key) once it answers:
    its Ed25519 cosignature/v1 key, or with ``pq`` its ML-DSA-44 subtree/v1 key."""
    port = free_port()
    state = tmp / "witness"
    out, err = (tmp / "witness.out").open("w"), (tmp / "witness.err").open("w")
    proc = subprocess.Popen(
        [
            SAIHM,
            "witness",
            "serve",
            "--state",
            str(state),
            "--port",
            str(port),
            "--logs-file",
            str(data / "checkpoint-verifier-keys.txt"),
            "--name",
            "w.example/w1",
        ],
        stdout=out,
        stderr=err,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + DEADLINE
        while True:  # bounded poll: a malformed body answers 400 once the witness listens
            try:
                if fetch(url + "/add-checkpoint", data=b"x", timeout=2)[0] == 400:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"witness did not start: {(tmp / 'witness.err').read_text()}")
            time.sleep(0.05)
        ed25519, mldsa44 = (state / "witness.vkey").read_text().split()
        printed = (tmp / "witness.out").read_text()
        assert ed25519 in printed and mldsa44 in printed  # printed on first run
        yield url, (mldsa44 if pq else ed25519)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        out.close()
        err.close()


def _size(note: bytes) -> int:
    return int(note.split(b"\n", 2)[1])


def _wait(what: str, check, deadline: float = DEADLINE):
    """Poll ``check()`` until it returns a true value, at most ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _witnessed(url: str, size: int) -> bytes | None:
    status, body = fetch(url + "log/checkpoint?witnessed=1")
    return body if status == 200 and _size(body) >= size else None


def _status_error(data: Path, text: str) -> bool:
    try:
        status = json.loads((data / "witness-status.json").read_text())
    except (OSError, ValueError):
        return False
    return any(text in (s.get("lastError") or "") for s in status.values())


def _saihm(*argv: str) -> subprocess.CompletedProcess[str]:
    return run_saihm(*argv)


def _log_size(data: Path) -> int:
    from saihm.compose import open_operator
    from saihm.config import Config

    operator = open_operator(Config.for_data(data), checkpointer=False)
    try:
        return operator.store.size()
    finally:
        operator.store.close()


def _grow_offline(data: Path, beyond: int) -> None:
    from saihm.compose import open_operator
    from saihm.config import Config

    operator = open_operator(Config.for_data(data), checkpointer=False)
    try:
        while operator.store.size() <= beyond:
            operator.admin.create_holder()
    finally:
        operator.store.close()


def test_witnessed_round_trip_then_rollback_and_fork_are_refused_and_detected(tmp_path) -> None:
    data, monitor_state = tmp_path / "d", tmp_path / "monitor"
    with serving(tmp_path, "--data", str(data), "--origin", ORIGIN):
        pass  # first run: the data directory, its origin and log keys
    holder_create(data)
    earlier = tmp_path / "earlier"
    shutil.copytree(data, earlier)  # the same log, one leaf in: a rollback target
    log_keys = (data / "checkpoint-verifier-keys.txt").read_text().split()

    with witness_serving(tmp_path, data) as (witness_url, vkey):
        spec = f"{witness_url}={vkey}"
        with serving(tmp_path, "--data", str(data), "--witness", spec) as (_, url):
            for _ in range(3):
                holder_create(data)
            size = _log_size(data)
            note = _wait("a cosigned checkpoint", lambda: _witnessed(url, size))
            # The round trip: the served note is the log's checkpoint plus the witness's line.
            assert verify_checkpoint(note, log_keys, ORIGIN).size == size
            assert verify_cosignatures(note, [vkey], 1) == ["w.example/w1"]
            logged = [
                json.loads(line)
                for line in (tmp_path / "witness.err").read_text().splitlines()
                if line.startswith("{")
            ]
            assert {"path": "/add-checkpoint", "status": 200} in [
                {"path": e["path"], "status": e["status"]} for e in logged
            ]
            assert all(set(e) == {"time", "method", "path", "status", "ms"} for e in logged)
            status, plain = fetch(url + "log/checkpoint")
            assert status == 200 and verify_checkpoint(plain, log_keys, ORIGIN).size == size
            watched = _saihm(
                "monitor", url, "--state", str(monitor_state), "--once", "--witness", vkey
            )
            assert watched.returncode == 0, watched.stderr
            assert json.loads(watched.stdout)["size"] == size

        # verify counts the witnesses of the newest cosigned checkpoint it checks.
        ok = _saihm("verify", "--data", str(data), "--no-progress", "--witness", vkey)
        assert ok.returncode == 0, ok.stdout
        assert f"witnesses: size {size} cosigned by w.example/w1 (1 required)" in ok.stdout
        other = CosignatureV1Signer.generate("w.example/w2").vkey()
        short = _saihm(
            "verify",
            "--data",
            str(data),
            "--no-progress",
            "--witness",
            vkey,
            "--witness",
            other,
            "--min-witnesses",
            "2",
        )
        assert short.returncode == 1
        assert "[witnesses] 1 of the given witnesses cosigned the checkpoint; 2 required" in (
            short.stdout
        )
        none = _saihm("verify", "--data", str(earlier), "--no-progress", "--witness", vkey)
        assert none.returncode == 1 and "no checkpoint carries a cosignature" in none.stdout
        held = tmp_path / "held.note"
        held.write_bytes(note)
        with_held = _saihm(
            "verify",
            "--data",
            str(data),
            "--no-progress",
            "--checkpoint",
            str(held),
            "--witness",
            vkey,
        )
        assert with_held.returncode == 0, with_held.stdout

        # Rollback: the operator restores the earlier copy of the data directory.
        current = tmp_path / "current"
        data.rename(current)
        shutil.copytree(earlier, data)
        with serving(tmp_path, "--data", str(data), "--witness", spec) as (_, url):
            _wait("the witness's refusal", lambda: _status_error(data, "rolled back"))
            assert fetch(url + "log/checkpoint?witnessed=1")[0] == 404
            caught = _saihm("monitor", url, "--state", str(monitor_state), "--once")
            assert caught.returncode == 1
            assert "rollback" in caught.stderr

        # Fork: the earlier copy grows other leaves past the size the witness cosigned.
        shutil.rmtree(data)
        shutil.copytree(earlier, data)
        _grow_offline(data, beyond=size)
        with serving(tmp_path, "--data", str(data), "--witness", spec) as (_, url):
            _wait("the witness's 422", lambda: _status_error(data, "HTTP 422"))
            caught = _saihm("monitor", url, "--state", str(monitor_state), "--once")
            assert caught.returncode == 1
            # The mirror-based monitor names a fork below the held size "fork".
            assert "inconsistent" in caught.stderr or "fork" in caught.stderr

        # The honest log, back in place, is still cosigned where it left off.
        shutil.rmtree(data)
        current.rename(data)
        with serving(tmp_path, "--data", str(data), "--witness", spec) as (_, url):
            holder_create(data)
            size = _log_size(data)
            note = _wait("a cosigned checkpoint", lambda: _witnessed(url, size))
            assert verify_cosignatures(note, [vkey], 1) == ["w.example/w1"]


def test_two_workers_share_one_submitter_and_serve_the_same_cosigned_checkpoint(
    tmp_path,
) -> None:
    """With --workers 2 one worker submits (the lock), and whichever worker answers serves
    the cosignature, since it is stored with the checkpoint; here the operator trusts the
    witness's ML-DSA-44 key. A monitor that trusts only another witness raises the alarm."""
    data = tmp_path / "d"
    with serving(tmp_path, "--data", str(data), "--origin", ORIGIN):
        pass
    with witness_serving(tmp_path, data, pq=True) as (witness_url, vkey):
        spec = f"{witness_url}={vkey}"
        with serving(tmp_path, "--data", str(data), "--witness", spec, "--workers", "2") as (
            _,
            url,
        ):
            holder_create(data)
            size = _log_size(data)
            note = _wait("a cosigned checkpoint", lambda: _witnessed(url, size))
            for _ in range(10):  # successive requests reach either worker
                assert _witnessed(url, size) == note
            assert verify_cosignatures(note, [vkey], 1) == ["w.example/w1"]
            stranger = CosignatureV1Signer.generate("w.example/w9").vkey()
            alarmed = _saihm(
                "monitor", url, "--state", str(tmp_path / "m"), "--once", "--witness", stranger
            )
            assert alarmed.returncode == 1
            assert "witnesses: 0 of the given witnesses cosigned" in alarmed.stderr
