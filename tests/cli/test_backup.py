"""``saihm backup --data DIR DEST`` and the documented restore (docs/operations.md "Backups and
restore"): a consistent, compacted copy without KEKs, safe while a server writes, and what a
restore does to erasures made after the backup."""

from __future__ import annotations

import json
import re
import resource
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from tests.support.cli import run_saihm
from tests.support.serve import SAIHM, holder_create, post, serving

saihm = run_saihm


def backup(data: Path, dest: Path) -> dict:
    done = saihm("backup", "--data", str(data), str(dest))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def verify_ok(data: Path, trust: Path) -> str:
    done = saihm("verify", "--data", str(data), "--trust", str(trust), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _one_line_failure(done: subprocess.CompletedProcess) -> None:
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_backup_taken_while_a_server_writes_is_one_consistent_snapshot(tmp_path) -> None:
    data = tmp_path / "data"
    # Three writers outrun the default per-token rate; this test is about the snapshot, not 429s.
    with serving(tmp_path, "--data", str(data), "--rate-limit", "0") as (_, url):
        holder = holder_create(data)
        stop = threading.Event()
        written: list[int] = []

        def writer() -> None:
            while not stop.is_set():
                status, _ = post(url, holder["token"], "saihm_remember", {"content": "w"})
                written.append(status)

        threads = [threading.Thread(target=writer) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            reports = []
            for i in range(3):
                # Each backup starts only once more writes have landed since the last one.
                floor = len(written) + 5
                for _ in range(2000):
                    if len(written) >= floor:
                        break
                    threading.Event().wait(0.01)
                reports.append(backup(data, tmp_path / f"backup-{i}"))
        finally:
            stop.set()
            for t in threads:
                t.join()
    assert written and set(written) == {200}
    sizes = [r["treeSize"] for r in reports]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]  # taken while the log grew
    keys = data / "checkpoint-verifier-keys.txt"
    for i, report in enumerate(reports):
        copy = tmp_path / f"backup-{i}"
        assert report["checkpointSize"] <= report["treeSize"]
        out = verify_ok(copy, keys)
        assert re.search(rf"^  leaves +{report['treeSize']}$", out, re.MULTILINE), out


def test_a_backup_holds_no_kek_even_when_the_kek_directory_is_inside_the_data(tmp_path) -> None:
    data = tmp_path / "data"
    inner_kek = data / "kek"
    with serving(tmp_path, "--data", str(data), "--kek-dir", str(inner_kek)) as (_, url):
        holder = holder_create_with(data, "--kek-dir", str(inner_kek))
        assert post(url, holder["token"], "saihm_remember", {"content": "secret tea"})[0] == 200
    report = backup_with(data, tmp_path / "copy", "--kek-dir", str(inner_kek))
    assert not any(name.startswith("kek") for name in report["files"])
    keks = [p.read_bytes() for p in inner_kek.iterdir() if p.is_file()]
    assert keks
    for path in (tmp_path / "copy").rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            assert b"secret tea" not in content
            for kek in keks:
                if len(kek) >= 16:
                    assert kek not in content, path


def holder_create_with(data: Path, *extra: str) -> dict:
    done = saihm("holder", "create", "--data", str(data), *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def backup_with(data: Path, dest: Path, *extra: str) -> dict:
    done = saihm("backup", "--data", str(data), *extra, str(dest))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_restore_then_erasure_semantics(tmp_path) -> None:
    """The documented restore: copy the backup back, point --data at it with the KEK directory
    and log keys in force, verify, serve. A forget after the backup is undone by the restore
    until the KEK generation is retired; after a retirement the backup's cells cannot be opened
    at all."""
    live, kek, authority = tmp_path / "data", tmp_path / "kek", tmp_path / "authority"
    with serving(tmp_path, "--data", str(live)) as (_, url):
        holder = holder_create(live)
        token = holder["token"]
        assert post(url, token, "saihm_remember", {"content": "kept note"})[0] == 200
        _, later = post(url, token, "saihm_remember", {"content": "forgotten later"})
        backup(live, tmp_path / "backup")
        assert post(url, token, "saihm_forget", {"id": later["cellId"]})[0] == 200
        _, after = post(url, token, "saihm_recall", {})
        assert [c["plaintext"] for c in after] == ["kept note"]

    # Restore: copy back, point --data at it, keep the KEK, authority and log key directories
    # in force (the backup holds none of them).
    restored = tmp_path / "restored" / "data"
    shutil.copytree(tmp_path / "backup", restored)
    keys = live / "checkpoint-verifier-keys.txt"
    verify_ok(restored, keys)
    common = ("--kek-dir", str(kek), "--authority-dir", str(authority))
    common += ("--log-keys-dir", str(live / "log-keys"))
    (tmp_path / "restored").mkdir(exist_ok=True)
    with serving(tmp_path / "restored", "--data", str(restored), *common) as (_, url):
        status, cells = post(url, token, "saihm_recall", {})
        assert status == 200
        # The forget came after the backup: the restored copy holds its wrapped DEK again.
        assert sorted(c["plaintext"] for c in cells) == ["forgotten later", "kept note"]

    # Retire the KEK generation the backup's keys are wrapped under (on the live directory).
    done = saihm("kek", "rotate", "--data", str(live))
    assert done.returncode == 0, done.stderr
    again = tmp_path / "again" / "data"
    shutil.copytree(tmp_path / "backup", again)
    verify_ok(again, keys)  # the log still verifies: receipts carry no plaintext
    with serving(tmp_path / "again", "--data", str(again), *common) as (_, url):
        # Every holder seed and DEK in the backup is wrapped under the retired generation: the
        # copy can no longer act for its holders or open a cell. It is an audit archive only.
        assert post(url, token, "saihm_recall", {}) == (500, {"error": "kek_unavailable"})
        status, body = post(url, token, "saihm_remember", {"content": "new"})
        assert (status, body) == (500, {"error": "kek_unavailable"})


@pytest.mark.parametrize("case", ["exists", "inside", "no-data", "no-parent"])
def test_bad_destinations_are_one_line_and_change_nothing(tmp_path, case) -> None:
    from saihm.compose import initialise
    from saihm.config import Config

    data = tmp_path / "data"
    initialise(Config.for_data(data))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    dest = {
        "exists": tmp_path / "data" / ".." / "data",
        "inside": data / "backup",
        "no-data": tmp_path / "dest",
        "no-parent": tmp_path / "missing" / "dest",
    }[case]
    source = tmp_path / "typo" if case == "no-data" else data
    done = saihm("backup", "--data", str(source), str(dest))
    _one_line_failure(done)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, 16 * 1024))


def test_a_full_disk_is_one_line_and_leaves_no_partial_backup(tmp_path) -> None:
    """A write refused mid-copy (RLIMIT_FSIZE stands in for a full disk: the same failed
    write(2)) leaves neither DEST nor a staging directory behind."""
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        holder = holder_create(data)
        for i in range(40):
            post(url, holder["token"], "saihm_remember", {"content": f"note {i} " * 50})
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [SAIHM, "backup", "--data", str(data), str(out / "dest")],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_file_size,
    )
    _one_line_failure(done)
    assert "cannot write the backup" in done.stderr
    assert list(out.iterdir()) == []
