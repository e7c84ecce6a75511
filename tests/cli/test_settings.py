"""Serve settings (DESIGN.md "Pinned additions": every serve option also as SAIHM_<OPTION> and
in the TOML file), derived from the serve parser so options added later need no code."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saihm.commands.main import Parser, build_parser, config_from, subparser
from saihm.commands.settings import SettingsError, parse_with_settings, settings_of

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def serve_parser() -> argparse.ArgumentParser:
    return subparser(build_parser(), "serve")


def parse(argv, env=None):
    return parse_with_settings(serve_parser(), list(argv), env or {})


def toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "saihm.toml"
    path.write_text(text)
    return str(path)


def test_every_serve_option_has_an_environment_variable_and_a_toml_key() -> None:
    names = {s.option: (s.env, s.key) for s in settings_of(serve_parser())}
    assert names["--tls-cert"] == ("SAIHM_TLS_CERT", "tls-cert")
    assert names["--data"] == ("SAIHM_DATA", "data")
    assert names["--no-governance" if "--no-governance" in names else "--governance"] == (
        "SAIHM_GOVERNANCE",
        "governance",
    )
    assert "--help" not in names and "--config" not in names


def test_every_serve_option_is_in_the_operations_table() -> None:
    text = DOCS.read_text()
    for s in settings_of(serve_parser()):
        assert f"| `{s.option}" in text and f"`{s.env}`" in text and f"`{s.key}`" in text, s


def test_precedence_is_command_line_then_environment_then_file_then_default(tmp_path) -> None:
    path = toml(tmp_path, 'data = "from-file"\nport = 1111\nworkers = 3\nhost = "::1"\n')
    env = {"SAIHM_PORT": "2222", "SAIHM_WORKERS": "4"}
    args = parse(["--config", path, "--workers", "5"], env)
    assert (args.data, args.port, args.workers, args.host) == ("from-file", 2222, 5, "::1")
    assert parse(["--data", "d"]).port == 8080  # the default when nobody says otherwise


def test_the_config_file_may_be_named_by_the_environment(tmp_path) -> None:
    path = toml(tmp_path, 'data = "d"\nrecall-receipts = false\n')
    args = parse([], {"SAIHM_CONFIG": path})
    assert args.recall_receipts is False and args.config == path


def test_switches_take_booleans_in_the_file_and_words_in_the_environment(tmp_path) -> None:
    path = toml(tmp_path, 'data = "d"\ngovernance = false\nstatus-receipts = true\n')
    args = parse(["--config", path], {"SAIHM_STATUS_RECEIPTS": "no"})
    assert (args.governance, args.status_receipts, args.recall_receipts) == (False, False, True)
    config = config_from(args)
    assert (config.governance, config.status_receipts, config.recall_receipts) == (
        False,
        False,
        True,
    )
    assert parse(["--data", "d", "--no-governance"], {"SAIHM_GOVERNANCE": "1"}).governance is False


def test_policy_options_reach_the_config() -> None:
    args = parse(
        ["--data", "d", "--checkpoint-interval", "0.25", "--kek-rotation-hours", "6"],
        {"SAIHM_VOTING_WINDOW": "60", "SAIHM_SERVICE_WINDOW_MS": "500"},
    )
    config = config_from(args)
    assert (config.checkpoint_interval, config.kek_rotation_hours) == (0.25, 6)
    assert (config.voting_window, config.service_window_ms) == (60, 500)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('dta = "x"\n', "unknown key 'dta'"),
        ('tls_cert = "x"\n', "did you mean 'tls-cert'"),
        ('port = "eighty"\n', "key 'port': invalid int value 'eighty'"),
        ("port = true\n", "key 'port': expected a int, not a boolean"),
        ("port = [1, 2]\n", "key 'port': expected a int, not a list"),
        ("workers = 1.5\n", "key 'workers': invalid int value '1.5'"),
        ('governance = "sometimes"\n', "key 'governance': expected true or false"),
        ("[serve]\nport = 1\n", "unknown key 'serve'"),
        ("port = \n", "not TOML"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key(tmp_path, text, needle) -> None:
    path = toml(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        parse(["--data", "d", "--config", path])
    message = str(caught.value)
    assert needle in message and "\n" not in message and path in message


def test_a_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(SettingsError, match=r"^\$SAIHM_PORT: invalid int value 'x'$"):
        parse(["--data", "d"], {"SAIHM_PORT": "x"})


def test_other_saihm_variables_are_left_to_their_programs() -> None:
    env = {"SAIHM_ENDPOINT_URL": "https://x", "SAIHM_AUTH_HEADER": "Bearer t", "SAIHM_DEBUG": "1"}
    assert parse(["--data", "d"], env).port == 8080


def test_data_is_required_of_the_three_sources_together() -> None:
    with pytest.raises(SettingsError, match=r"--data is required .*\$SAIHM_DATA"):
        parse([])
    assert parse([], {"SAIHM_DATA": "d"}).data == "d"


def test_an_option_a_colleague_adds_later_is_settable_with_no_further_code(tmp_path) -> None:
    """The mechanism reads argparse definitions: an int, a choice, a switch and a repeatable
    option added to a parser all work from the environment and the file."""
    parser = Parser(prog="saihm serve")
    parser.add_argument("--map-size", type=int, default=1 << 30)
    parser.add_argument("--mode", choices=["a", "b"], default="a")
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--witness", action="append", metavar="VKEY")
    parser.add_argument("--config")
    path = toml(tmp_path, 'map-size = 4096\nwitness = ["w1", "w2"]\nstrict = true\n')
    args = parse_with_settings(parser, ["--config", path], {"SAIHM_MODE": "b"})
    assert (args.map_size, args.mode, args.strict, args.witness) == (4096, "b", True, ["w1", "w2"])
    args = parse_with_settings(parser, ["--witness", "w3"], {"SAIHM_WITNESS": '["w1"]'})
    assert args.witness == ["w3"]  # the command line replaces, not extends
    args = parse_with_settings(parser, [], {"SAIHM_WITNESS": "one"})
    assert args.witness == ["one"]
    with pytest.raises(SettingsError, match=r"\$SAIHM_MODE: 'c' is not one of a, b"):
        parse_with_settings(parser, [], {"SAIHM_MODE": "c"})


@given(
    port=st.integers(0, 65535),
    interval=st.floats(0.001, 1e6, allow_nan=False),
    hours=st.integers(0, 168),
)
def test_every_source_gives_the_value_the_command_line_gives(port, interval, hours) -> None:
    argv = ["--port", str(port), "--checkpoint-interval", repr(interval)]
    argv += ["--kek-rotation-hours", str(hours)]
    cli = parse(["--data", "d", *argv])
    env = parse(
        ["--data", "d"],
        {
            "SAIHM_PORT": str(port),
            "SAIHM_CHECKPOINT_INTERVAL": repr(interval),
            "SAIHM_KEK_ROTATION_HOURS": str(hours),
        },
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "s.toml")
        path.write_text(
            f"port = {port}\ncheckpoint-interval = {interval!r}\nkek-rotation-hours = {hours}\n"
        )
        file = parse(["--data", "d", "--config", str(path)])
    for got in (env, file):
        assert (got.port, got.checkpoint_interval, got.kek_rotation_hours) == (
            cli.port,
            cli.checkpoint_interval,
            cli.kek_rotation_hours,
        )


HELP_COMMANDS = [
    ["serve"],
    ["holder", "create"],
    ["session", "open"],
    ["grant"],
    ["grant", "revoke"],
    ["kek", "rotate"],
    ["rebuild"],
    ["backup"],
    ["export"],
    ["verify"],
    ["monitor"],
    ["mirror"],
    ["publish"],
    ["replay"],
    ["memory", "init"],
    ["memory", "grant"],
    ["memory", "query"],
    ["memory", "pending"],
    ["bench", "translog"],
    ["bench", "crypto"],
    ["bench", "store"],
    ["bench", "verify"],
    ["bench", "http"],
]


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=" ".join)
def test_help_states_every_options_default(capsys, command) -> None:
    """Every option line of every command's --help names its default (or says required)."""
    from saihm.commands.main import main

    assert main([*command, "--help"]) == 0
    text = capsys.readouterr().out
    options = text.split("options:", 1)[1]
    entries = re.split(r"\n  (?=-)", "\n" + options)
    checked = 0
    for entry in entries:
        flat = " ".join(entry.split())
        if not flat.startswith("-") or flat.startswith("-h, --help"):
            continue
        checked += 1
        assert "default" in flat or "required" in flat, (command, flat)
    assert checked > 0
