"""``saihm backup`` never copies key material (docs/operations.md "Backups and restore"): not
the KEK generations, the memo key or the rotation state, not the authority seed and, unless
``--include-log-keys``, not the log's signing keys, wherever in the data directory they lie and
whatever key directories the backup command itself was told about."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from saihm.authority import Authority
from saihm.compose import open_operator
from saihm.config import Config
from saihm.keyring.kekdir import KekDirectory
from saihm.translog.checkpoint import LogKeys
from tests.support.cli import one_line_refusal, run_saihm
from tests.support.serve import ROOT, post, serving

saihm = run_saihm


def _create(config: Config) -> None:
    """A new data directory with its key directories where ``config`` puts them."""
    open_operator(config, checkpointer=False).store.close()


def _files(directory: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _secrets(*directories: Path) -> dict[Path, bytes]:
    """Every private key file of these key directories (the public ones are meant to travel)."""
    public = {"authority.pub", "checkpoint-verifier-keys.txt", ".lock", "rotate.lock"}
    return {p: b for d in directories for p, b in _files(d).items() if p.name not in public}


def _assert_none_copied(secrets: dict[Path, bytes], backup: Path) -> None:
    assert secrets
    copied = _files(backup)
    for path, secret in secrets.items():
        assert len(secret) >= 32, path
        leaks = [str(p) for p, content in copied.items() if secret in content]
        assert not leaks, f"{path} is in the backup as {leaks}"


@pytest.mark.parametrize("given", ["no key directories", "--kek-dir"])
def test_keys_kept_inside_the_data_directory_stay_out_of_a_backup(tmp_path, given) -> None:
    """The attack: the KEKs in DIR/keys and the authority in DIR/auth, backed up with no key
    directories named, or with only --kek-dir. The backup holds none of their keys, so a restore
    of it opens no cell forgotten after the backup (its KEK generation rotated out since) and
    mints no token."""
    data = tmp_path / "data"
    keys, auth, log_keys = data / "keys", data / "auth", data / "log-keys"
    where = ("--kek-dir", str(keys), "--authority-dir", str(auth))
    with serving(tmp_path, "--data", str(data), *where) as (_, url):
        made = saihm("holder", "create", "--data", str(data), *where)
        assert made.returncode == 0, made.stderr
        token = json.loads(made.stdout)["token"]
        assert post(url, token, "saihm_remember", {"content": "kept note"})[0] == 200
        _, later = post(url, token, "saihm_remember", {"content": "forgotten later"})
        secrets = _secrets(keys, auth, log_keys)
        extra = ("--kek-dir", str(keys)) if given == "--kek-dir" else ()
        done = saihm("backup", "--data", str(data), *extra, str(tmp_path / "copy"))
        assert done.returncode == 0, done.stderr
        assert post(url, token, "saihm_forget", {"id": later["cellId"]})[0] == 200
    rotated = saihm("kek", "rotate", "--data", str(data), *where)
    assert rotated.returncode == 0, rotated.stderr

    _assert_none_copied(secrets, tmp_path / "copy")
    assert set(json.loads(done.stdout)["leftOut"]) == {"auth/", "keys/", "log-keys/"}
    assert "left out auth/ (the authority seed)" in done.stderr

    # A restore pointed at the key directories where the copy would hold them.
    restored = tmp_path / "restored" / "data"
    shutil.copytree(tmp_path / "copy", restored)
    copied = ("--authority-dir", str(restored / "auth"), "--log-keys-dir", str(log_keys))
    # No authority seed to sign with (with the KEKs in force, so that the seed alone is tested).
    minted = saihm("holder", "create", "--data", str(restored), "--kek-dir", str(keys), *copied)
    assert "no authority key" in one_line_refusal(minted)
    restore = ("--data", str(restored), "--kek-dir", str(restored / "keys"), *copied)
    with serving(tmp_path / "restored", *restore) as (_, url):
        status, cells = post(url, token, "saihm_recall", {})
    assert status != 200 and "forgotten later" not in json.dumps(cells), (status, cells)


def test_key_directories_linked_into_the_data_directory_stay_out(tmp_path) -> None:
    """Symbolic links in the data directory to key directories and a key file elsewhere are
    judged by what they point at, even when the backup is given other key directories; a
    directory holding a key file is left out whole."""
    data, vault = tmp_path / "data", tmp_path / "vault"
    _create(Config.for_data(data, vault / "kek", vault / "authority", vault / "log"))
    KekDirectory(vault / "kek").new_generation()
    (data / "kek").symlink_to(vault / "kek")
    (data / "signing").symlink_to(vault / "log")
    (data / "nested").mkdir()
    (data / "nested" / "seed").symlink_to(vault / "authority" / "authority.seed")
    (data / "old").symlink_to(vault / "authority" / "authority.seed")
    elsewhere = ("--kek-dir", str(tmp_path / "other"), "--authority-dir", str(tmp_path / "other"))
    done = saihm("backup", "--data", str(data), *elsewhere, str(tmp_path / "copy"))
    assert done.returncode == 0, done.stderr
    _assert_none_copied(_secrets(vault), tmp_path / "copy")
    assert set(json.loads(done.stdout)["leftOut"]) == {"kek/", "signing/", "nested/", "old"}


def test_log_keys_are_copied_only_with_include_log_keys(tmp_path) -> None:
    """The log's signing keys in the default DIR/log-keys are left out of a backup, and copied
    by the documented --include-log-keys, which still copies no other key."""
    data = tmp_path / "data"
    _create(Config.for_data(data, data / "keys", data / "auth"))
    log_keys = _secrets(data / "log-keys")
    assert len(log_keys) == 2

    plain = saihm("backup", "--data", str(data), str(tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr
    _assert_none_copied(log_keys, tmp_path / "plain")
    assert "--include-log-keys copies them" in plain.stderr

    done = saihm("backup", "--data", str(data), "--include-log-keys", str(tmp_path / "with"))
    assert done.returncode == 0, done.stderr
    for path, secret in log_keys.items():
        assert (tmp_path / "with" / "log-keys" / path.name).read_bytes() == secret
    assert set(json.loads(done.stdout)["leftOut"]) == {"auth/", "keys/"}
    _assert_none_copied(_secrets(data / "keys", data / "auth"), tmp_path / "with")

    assert "--include-log-keys" in saihm("backup", "--help").stdout
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "`--include-log-keys`" in operations


def test_every_key_file_the_project_writes_is_recognised(tmp_path) -> None:
    """The names and markers the backup goes by are the ones the key directories are written
    with; their public files are not mistaken for keys."""
    from saihm.offline.backup import key_material

    kek = KekDirectory(tmp_path / "kek")
    kek.new_generation()
    Authority.open(tmp_path / "authority", create=True)
    LogKeys.generate("example.com/log").save(tmp_path / "log")
    for path in sorted(tmp_path.rglob("*")):
        if not path.is_file():
            continue
        public = path.name in {"authority.pub", "checkpoint-verifier-keys.txt", ".lock"}
        assert (key_material(path) is None) == public, path
