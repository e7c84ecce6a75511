"""``--store URL`` on the command line (DESIGN.md "Pinned additions for the second round"):
also ``$SAIHM_STORE`` and ``store`` in the serve config file; a bad or unreachable URL is one
line and a non-zero exit that never shows the password; ``saihm backup`` on a PostgreSQL store
says to use the database's own backups."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from saihm.commands.main import build_parser, subparser
from saihm.commands.settings import parse_with_settings
from saihm.storage.url import check_store_url, redact, scrub
from tests.cli.test_migrate import populate
from tests.support.cli import one_line_refusal, run_saihm

SECRET = "hunter22"
UNREACHABLE = f"postgresql://saihm:{SECRET}@127.0.0.1:1/saihm"  # port 1: nothing listens


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    return one_line_refusal(done, SECRET)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("store-option") / "data"
    populate(data, remembers=1)
    return data


@pytest.mark.parametrize(
    "argv",
    [
        ["holder", "create"],
        ["session", "open", "--holder", "00" * 32],
        ["grant", "--holder", "00" * 32, "--sessions", "all"],
        ["kek", "rotate"],
        ["rebuild"],
    ],
)
def test_an_unreachable_store_is_one_line_without_the_password(data: Path, argv: list[str]) -> None:
    line = _one_line(run_saihm(*argv, "--data", str(data), "--store", UNREACHABLE))
    assert "127.0.0.1:1" in line


def test_the_store_may_come_from_the_environment(data: Path) -> None:
    line = _one_line(
        run_saihm("holder", "create", "--data", str(data), env={"SAIHM_STORE": UNREACHABLE})
    )
    assert "127.0.0.1:1" in line


@pytest.mark.parametrize(
    "url", [f"mysql://u:{SECRET}@h/db", f"postgresql://u:{SECRET}@h:port/db", "./saihm-data"]
)
def test_a_url_that_is_not_postgresql_is_refused_before_anything_opens(
    data: Path, url: str
) -> None:
    line = _one_line(run_saihm("holder", "create", "--data", str(data), "--store", url))
    assert "--store" in line


def test_verify_and_export_take_the_store_and_hide_its_password(data: Path, tmp_path: Path) -> None:
    line = _one_line(
        run_saihm("verify", "--data", str(data), "--store", UNREACHABLE, "--no-progress")
    )
    assert line.startswith("saihm: error: ")
    out = str(tmp_path / "bundle.cbor")
    line = _one_line(run_saihm("export", "--data", str(data), "--store", UNREACHABLE, "--out", out))
    assert line.startswith("saihm: error: ") and not Path(out).exists()


def test_serve_with_an_unreachable_store_exits_with_one_line(tmp_path: Path) -> None:
    done = run_saihm("serve", "--data", str(tmp_path / "d"), "--port", "0", "--store", UNREACHABLE)
    assert done.returncode != 0
    assert SECRET not in done.stderr + done.stdout and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("saihm: error:"), done.stderr
    assert "serving" not in done.stdout and not (tmp_path / "d").exists()


def test_backup_of_a_postgresql_store_points_at_the_database_tools(
    data: Path, tmp_path: Path
) -> None:
    line = _one_line(
        run_saihm("backup", "--data", str(data), "--store", UNREACHABLE, str(tmp_path / "b"))
    )
    assert "pg_dump" in line and not (tmp_path / "b").exists()


def test_serve_reads_the_store_from_the_config_file_and_the_environment(tmp_path: Path) -> None:
    serve = subparser(build_parser(), "serve")
    config = tmp_path / "saihm.toml"
    config.write_text('data = "d"\nstore = "postgresql://saihm@db/one"\n')
    args = parse_with_settings(serve, ["--config", str(config)], {})
    assert args.store == "postgresql://saihm@db/one"
    args = parse_with_settings(
        serve, ["--config", str(config)], {"SAIHM_STORE": "postgresql://e/x"}
    )
    assert args.store == "postgresql://e/x"
    args = parse_with_settings(serve, ["--data", "d"], {})
    assert args.store is None


def test_redaction_removes_every_form_of_the_password() -> None:
    assert redact(f"postgresql://u:{SECRET}@h/db") == "postgresql://u:***@h/db"
    assert SECRET not in redact(f"host=h password={SECRET} dbname=x")
    assert SECRET not in redact(f"postgresql://u@h/db?password={SECRET}&sslmode=require")
    assert (
        scrub(f"auth failed for {SECRET}", f"postgresql://u:{SECRET}@h/db") == "auth failed for ***"
    )
    assert check_store_url("postgresql:///saihm?host=/run/postgresql") == (
        "postgresql:///saihm?host=/run/postgresql"
    )


def test_a_data_directory_names_its_store_by_database_and_search_path(tmp_path: Path) -> None:
    """saihm/storage/url.py ``refuse_other_store``: the recorded store (the marker holds its
    URL without the password) is the same store under any user, password, host, port, scheme
    spelling or other setting; another database or ``search_path`` is another store."""
    from saihm.errors import Conflict
    from saihm.storage.url import record_store_elsewhere, refuse_other_store

    recorded = "postgresql://u:pw@db.internal:5432/saihm?options=-c%20search_path%3Dlog"
    record_store_elsewhere(tmp_path, recorded)
    assert "pw" not in (tmp_path / "store-elsewhere").read_text()
    for same in (
        recorded,
        "postgres://other:secret@10.0.0.7/saihm?options=-c%20search_path%3Dlog",
        "postgresql:///saihm?host=/run/postgresql&options=-csearch_path%3Dlog%20-c%20lock_timeout%3D2s",
        "postgresql://u@h/ignored?dbname=saihm&options=--search-path%3Dlog&sslmode=require",
    ):
        refuse_other_store(tmp_path, same)
    for other in (
        "postgresql://u:pw@db.internal:5432/saihm",  # the database's default schema
        "postgresql://u:pw@db.internal:5432/saihm?options=-c%20search_path%3Dlog2",
        "postgresql://u:pw@db.internal:5432/saihm2?options=-c%20search_path%3Dlog",
        f"postgresql://u:{SECRET}@db.internal/other",
    ):
        with pytest.raises(Conflict, match="--store") as refused:
            refuse_other_store(tmp_path, other)
        assert SECRET not in str(refused.value) and ":pw@" not in str(refused.value)
