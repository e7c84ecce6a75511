"""Printed "run this command" hints carry ``--store`` when the operator's store is in PostgreSQL
(saihm/storage/hint.py, saihm/authority/continuity.py, saihm/client/advice.py; docs/scaling.md).

The server and the data commands know where the store is, so their hints gain
``--store "$SAIHM_STORE"`` (the variable, never the URL: it may hold a password); the client
cannot know, so its advice says to add ``--store URL``. The PostgreSQL tests run the printed
hint itself and show it works as printed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saihm.authority import Authority
from saihm.authority.continuity import token_summary
from saihm.client.advice import advice_for
from saihm.events import CapabilityScope
from saihm.storage.hint import STORE_ARG, with_store
from tests.support.cli import run_saihm
from tests.support.postgres import lmdb_only
from tests.support.postgres import postgres_location as postgres_location
from tests.support.serve import SAIHM

URL = "postgresql://saihm:s3cret-pw@db.example:5432/saihm"
COMMAND = re.compile(r"`(saihm [^`]*)`")


def test_a_hint_gains_the_store_variable_after_its_data_directory() -> None:
    text = "projections reflect 3 of 5 log entries; run `saihm rebuild --data DIR --replace`"
    assert with_store(text, URL) == (
        "projections reflect 3 of 5 log entries; "
        'run `saihm rebuild --data DIR --store "$SAIHM_STORE" --replace`'
    )
    assert with_store(text, None) == text  # LMDB: the hint is right as it is
    assert with_store(text, "/srv/out") == text  # not a store URL (publish --to OUT)


def test_a_hint_that_names_a_store_or_no_data_directory_is_left_alone() -> None:
    named = "run `saihm verify --data D --store postgresql://u@h/db`"
    assert with_store(named, URL) == named
    bare = "use a token from `saihm holder create` or `saihm grant`"
    assert with_store(bare, URL) == bare
    unquoted = "saihm rebuild --data DIR --replace"  # prose, not a quoted command
    assert with_store(unquoted, URL) == unquoted


@given(st.text(alphabet=st.sampled_from("`saihm --dat DIR xyz\n"), max_size=120))
def test_the_url_never_appears_and_only_quoted_commands_change(text: str) -> None:
    out = with_store(text, URL)
    assert "s3cret-pw" not in out and URL not in out
    assert out.replace(f" {STORE_ARG}", "") == text
    assert out.count(STORE_ARG) <= len(COMMAND.findall(text))


def _cap(tmp_path: Path, scope: CapabilityScope | None = None):
    authority = Authority.open(tmp_path / "authority", create=True)
    return authority.issue(b"\x01" * 32, b"\x02" * 32, scope or CapabilityScope(), 3600, now=0)


def test_the_token_summary_names_the_store_only_for_a_postgresql_store(tmp_path: Path) -> None:
    cap = _cap(tmp_path)
    lmdb = token_summary(cap, "/d", now=0)
    pg = token_summary(cap, "/d", now=0, store=URL)
    assert "--store" not in lmdb
    commands = COMMAND.findall(pg)
    assert [c.split(" --holder")[0] for c in commands] == [
        f"saihm session renew --data /d {STORE_ARG}",
        f"saihm grant --data /d {STORE_ARG}",
    ]
    assert "s3cret-pw" not in pg and "db.example" not in pg
    grant = _cap(tmp_path / "g", CapabilityScope(sessions="all", grant_id=b"\x03" * 32))
    shown = token_summary(grant, "/d", now=0, store=URL)
    assert f"`saihm grant revoke --data /d {STORE_ARG} {'03' * 32}`" in shown


@pytest.mark.parametrize(("status", "code"), [(401, None), (403, "not_holder")])
def test_the_clients_advice_says_to_add_the_store_for_postgresql(status, code) -> None:
    advice = advice_for(status, code)
    assert advice is not None
    assert "--data DIR" in advice and "add --store URL" in advice and "PostgreSQL" in advice
    assert "postgresql://" not in advice  # the client knows no URL to quote


def _as_printed(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A printed ``saihm ...`` command run by a shell with ``env``, as a user would paste it."""
    return subprocess.run(
        ["bash", "-c", command.replace("saihm ", f"{SAIHM} ", 1)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def _holder_create(*argv: str, env: dict[str, str] | None = None) -> tuple[dict, str]:
    done = run_saihm("holder", "create", *argv, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def _initialise(data: Path, store: str | None = None) -> None:
    """A data directory as ``saihm serve`` leaves it on first run."""
    from saihm.compose import initialise
    from saihm.config import Config

    initialise(Config.for_data(data, store=store))


@lmdb_only("the store is LMDB here; the PostgreSQL pass would put it in PostgreSQL")
def test_an_lmdb_operators_hints_have_no_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _initialise(data)
    _, err = _holder_create("--data", str(data))
    assert "Renew it: `saihm session renew --data" in err and "--store" not in err


@pytest.mark.parametrize("how", ["option", "environment"])
def test_the_printed_hints_of_a_postgresql_store_run_as_printed(
    tmp_path: Path, postgres_location: str, how: str
) -> None:
    """``holder create --store URL`` (or with $SAIHM_STORE) prints the renew and grant
    commands with ``--store "$SAIHM_STORE"``; run by a shell that has SAIHM_STORE, each works
    as printed; the password is printed nowhere."""
    data = tmp_path / "data"
    env = {"SAIHM_STORE": postgres_location}
    argv = ["--data", str(data)]
    _initialise(data, postgres_location)
    if how == "option":
        holder, err = _holder_create(*argv, "--store", postgres_location)
    else:
        holder, err = _holder_create(*argv, env=env)
    password = urlsplit(postgres_location).password
    assert password and password not in err
    commands = COMMAND.findall(err)
    assert len(commands) == 2 and all(STORE_ARG in c for c in commands), err
    done = _as_printed(commands[0], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sessionId"] == holder["sessionId"]
    done = _as_printed(commands[1].replace("SECONDS", "600"), env)
    assert done.returncode == 0, done.stderr
    assert password not in done.stderr
