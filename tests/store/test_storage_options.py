"""``saihm serve --map-size/--map-size-max/--min-free-disk``: parsed into the Config, bad values
refused with one line and a non-zero exit (docs/operations.md "Storage limits")."""

from __future__ import annotations

import pytest

from saihm.commands.main import build_parser, config_from, main
from saihm.config import Config

MIB = 1 << 20


def test_the_storage_options_reach_the_config(tmp_path):
    args = build_parser().parse_args(
        [
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--map-size",
            str(2 * MIB),
            "--map-size-max",
            str(64 * MIB),
            "--min-free-disk",
            "0",
        ]
    )
    config = config_from(args)
    assert (config.map_size, config.map_size_max, config.min_free_disk) == (2 * MIB, 64 * MIB, 0)


def test_without_the_options_the_defaults_hold(tmp_path):
    config = config_from(build_parser().parse_args(["serve", "--data", str(tmp_path / "d")]))
    defaults = Config.for_data(tmp_path / "d")
    assert (config.map_size, config.map_size_max, config.min_free_disk) == (
        defaults.map_size,
        defaults.map_size_max,
        defaults.min_free_disk,
    )


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--map-size", "-1"),
        ("--map-size", "4096"),
        ("--map-size-max", "0"),
        ("--min-free-disk", "-5"),
    ],
)
def test_a_bad_storage_option_is_one_line_and_changes_nothing(tmp_path, capsys, option, value):
    data = tmp_path / "d"
    code = main(["serve", "--data", str(data), "--port", "0", option, value])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and option in err and "Traceback" not in err
    assert not data.exists()
