"""The log's identity (saihm/translog/origin.py, docs/formats.md §2): chosen once when the data
directory is created, a default unique per deployment, refused when a later start names
another, kept by first-round directories, and read by every command that opens the store."""

from __future__ import annotations

import multiprocessing
import re
import subprocess
import sys
from pathlib import Path

import pytest

from saihm.compose import open_operator
from saihm.config import Config
from saihm.errors import Conflict, MalformedInput
from saihm.translog import LogKeys, verify_checkpoint
from saihm.translog.note import parse_vkey
from saihm.translog.origin import (
    LEGACY_ORIGIN,
    ORIGIN_FILE,
    default_origin,
    record_origin,
    recorded_origin,
)

SAIHM = str(Path(sys.executable).parent / "saihm")


def _open(data: Path, **options):
    operator = open_operator(Config.for_data(data, **options), checkpointer=False)
    return operator


def _served_origin(operator) -> str:
    note = operator.store.checkpoint_now()
    return note.split(b"\n", 1)[0].decode()


def test_a_new_data_directory_gets_a_default_origin_derived_from_its_log_key(tmp_path) -> None:
    """Without --origin, the origin is saihm.localhost/log/<first 8 hex of SHA-256 of the
    log's Ed25519 key>: unique per deployment, and what every checkpoint carries."""
    operator = _open(tmp_path / "d")
    try:
        origin = operator.store.origin
        assert re.fullmatch(r"saihm\.localhost/log/[0-9a-f]{8}", origin)
        _, _, _, ed25519 = parse_vkey(operator.store.log_keys.verifier_keys()[0])
        assert origin == default_origin(ed25519)
        assert _served_origin(operator) == origin
        assert operator.config.origin == origin
        assert (tmp_path / "d" / ORIGIN_FILE).read_text() == origin + "\n"
        assert all(k.startswith(origin + "+") for k in operator.store.log_keys.verifier_keys())
    finally:
        operator.store.close()


def test_two_deployments_never_share_the_default_origin(tmp_path) -> None:
    origins = set()
    for name in ("one", "two", "three"):
        operator = _open(tmp_path / name / "d")
        origins.add(operator.store.origin)
        operator.store.close()
    assert len(origins) == 3


def test_a_chosen_origin_is_recorded_and_read_back_by_every_later_open(tmp_path) -> None:
    data = tmp_path / "d"
    operator = _open(data, origin="log.example.com/saihm")
    operator.store.close()
    assert recorded_origin(data) == "log.example.com/saihm"
    # A later command that names no origin (holder create, export, ...) reads the recorded one.
    config = Config.for_data(data)
    assert config.origin == "log.example.com/saihm"
    operator = _open(data)
    try:
        operator.admin.create_holder()
        note = operator.store.checkpoint_now()
        keys = operator.store.log_keys.verifier_keys()
        assert verify_checkpoint(note, keys, "log.example.com/saihm").size >= 1
    finally:
        operator.store.close()


def test_an_origin_cannot_change(tmp_path) -> None:
    data = tmp_path / "d"
    _open(data, origin="a.example/log").store.close()
    with pytest.raises(Conflict, match="origin cannot change"):
        Config.for_data(data, origin="b.example/log")
    # The same origin again is fine.
    assert Config.for_data(data, origin="a.example/log").origin == "a.example/log"


def test_the_store_refuses_a_config_that_names_another_origin(tmp_path) -> None:
    """Even a Config built by hand (not through for_data) cannot change the origin."""
    from saihm.store import Store

    data = tmp_path / "d"
    _open(data, origin="a.example/log").store.close()
    config = Config.for_data(data)
    forged = type(config)(**{**config.__dict__, "origin": "b.example/log"})
    with pytest.raises(Conflict):
        Store(forged)


@pytest.mark.parametrize("bad", ["has space", "a+b", "", "x" * 256, "tab\there", "nl\nx"])
def test_a_bad_origin_is_refused_before_anything_is_created(tmp_path, bad) -> None:
    with pytest.raises(MalformedInput):
        Config.for_data(tmp_path / "d", origin=bad)
    assert not (tmp_path / "d").exists()


def test_a_first_round_directory_keeps_saihm_localhost_log(tmp_path) -> None:
    """A data directory made before origins were recorded (no origin file, keys and
    checkpoints named saihm.localhost/log) keeps that origin and records it on first open."""
    data = tmp_path / "d"
    operator = _open(data, origin=LEGACY_ORIGIN)
    operator.admin.create_holder()
    operator.store.close()
    (data / ORIGIN_FILE).unlink()  # what a first-round directory looks like
    assert recorded_origin(data) == LEGACY_ORIGIN
    with pytest.raises(Conflict):
        Config.for_data(data, origin="new.example/log")
    operator = _open(data)
    try:
        assert operator.store.origin == LEGACY_ORIGIN
        assert _served_origin(operator) == LEGACY_ORIGIN
    finally:
        operator.store.close()
    assert (data / ORIGIN_FILE).read_text() == LEGACY_ORIGIN + "\n"


def test_an_edited_origin_file_is_refused_at_open(tmp_path) -> None:
    """A careless or hostile edit of <data>/origin cannot rename the log: its keys are named
    after the real origin, so the store refuses to open; a garbled file is a clear error."""
    data = tmp_path / "d"
    _open(data, origin="a.example/log").store.close()
    (data / ORIGIN_FILE).write_text("b.example/log\n")
    with pytest.raises(Conflict, match=r"keys are named a\.example/log"):
        _open(data)
    (data / ORIGIN_FILE).write_text("a.example/log\nsecond line\n")
    with pytest.raises(MalformedInput):
        Config.for_data(data)


def test_log_keys_named_for_another_origin_are_refused(tmp_path) -> None:
    data, keys_dir = tmp_path / "d", tmp_path / "keys"
    LogKeys.generate("other.example/log").save(keys_dir)
    with pytest.raises(Conflict):
        _open(data, origin="mine.example/log", log_keys_dir=keys_dir)


def _record(data: str, origin: str, start, out) -> None:
    start.wait()
    try:
        record_origin(data, origin)
        out.put((origin, "recorded"))
    except Conflict:
        out.put((origin, "conflict"))


def test_two_processes_recording_different_origins_one_wins(tmp_path) -> None:
    """The origin file appears whole, once: of processes racing to create one directory with
    different origins, exactly one records its origin and the others are refused."""
    data = tmp_path / "d"
    data.mkdir()
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    names = [f"o{i}.example/log" for i in range(4)]
    procs = [ctx.Process(target=_record, args=(str(data), n, start, out)) for n in names]
    for p in procs:
        p.start()
    start.set()
    results = dict(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    winners = [n for n, r in results.items() if r == "recorded"]
    assert len(winners) == 1
    assert recorded_origin(data) == winners[0]
    assert sorted(p.name for p in data.iterdir()) == [ORIGIN_FILE]


def test_serve_refuses_another_origin_in_one_line(tmp_path) -> None:
    data = tmp_path / "d"
    _open(data, origin="a.example/log").store.close()
    done = subprocess.run(
        [SAIHM, "serve", "--data", str(data), "--port", "0", "--origin", "b.example/log"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "origin cannot change" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_copy_restored_without_its_origin_file_keeps_its_own_origin(tmp_path) -> None:
    """Without ``<data>/origin`` the origin is the key name the directory publishes, so a
    backup that left the file out does not turn into saihm.localhost/log."""
    data = tmp_path / "d"
    operator = _open(data)
    origin = operator.store.origin
    operator.store.close()
    (data / ORIGIN_FILE).unlink()
    assert recorded_origin(data) == origin != LEGACY_ORIGIN
    operator = _open(data)
    try:
        assert _served_origin(operator) == origin
    finally:
        operator.store.close()


def test_a_store_refused_after_its_storage_opened_closes_it(tmp_path, monkeypatch) -> None:
    """Another origin's log keys are found after the storage is open: the refusal closes it
    (on PostgreSQL, an unclosed pool's threads outlived the refused open)."""
    import saihm.store.environment as environment

    opened, closed = [], []

    def recording_open(*args, **kwargs):
        storage = open_storage(*args, **kwargs)
        close = storage.close

        def recorded_close() -> None:
            closed.append(storage)
            close()

        storage.close = recorded_close
        opened.append(storage)
        return storage

    open_storage = environment.open_storage
    monkeypatch.setattr(environment, "open_storage", recording_open)
    data, keys_dir = tmp_path / "d", tmp_path / "keys"
    LogKeys.generate("other.example/log").save(keys_dir)
    with pytest.raises(Conflict):
        _open(data, origin="mine.example/log", log_keys_dir=keys_dir)
    assert len(opened) == 1, "the refusal came before the storage opened: the test proves nothing"
    assert closed == opened
