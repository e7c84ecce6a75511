"""``saihm publish`` writes nothing outside OUT: a symbolic link under OUT is refused.

A publication directory is often served by a web server and filled by cron; a link planted in it
(``OUT/tile`` pointing at ``/etc``, say) must not turn ``publish`` into a writer of files
elsewhere. Each case below plants one link, runs ``saihm publish`` and checks the one-line
refusal names the link and that the link's target is exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import one_line_refusal, run_saihm

from .conftest import World


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _publish(world: World, out: Path):
    return run_saihm("publish", "--data", str(world.data), "--to", str(out))


def _tile_dir(out: Path, outside: Path) -> str:
    out.mkdir()
    (out / "tile").symlink_to(outside, target_is_directory=True)
    return "tile"


def _partial_tile_dir(out: Path, outside: Path) -> str:
    (out / "tile" / "0").mkdir(parents=True)
    (out / "tile" / "0" / "000.p").symlink_to(outside, target_is_directory=True)
    return "tile/0/000.p"


def _partial_tile_file(out: Path, outside: Path) -> str:
    (out / "tile" / "0" / "000.p").mkdir(parents=True)
    (outside / "12").write_bytes(b"not a tile")
    (out / "tile" / "0" / "000.p" / "12").symlink_to(outside / "12")
    return "tile/0/000.p/12"


def _keys_dir(out: Path, outside: Path) -> str:
    out.mkdir()
    (out / "v1").symlink_to(outside, target_is_directory=True)
    return "v1"


def _explorer_dir(out: Path, outside: Path) -> str:
    out.mkdir()
    (out / "explorer").symlink_to(outside, target_is_directory=True)
    return "explorer"


PLANTS: dict[str, Callable[[Path, Path], str]] = {
    "tile": _tile_dir,
    "partial-tile-dir": _partial_tile_dir,
    "partial-tile-file": _partial_tile_file,
    "v1": _keys_dir,
    "explorer": _explorer_dir,
}


@pytest.mark.parametrize("plant", PLANTS)
def test_publish_refuses_a_link_under_out_and_writes_nothing_through_it(
    world: World, tmp_path: Path, plant: str
) -> None:
    out, outside = tmp_path / "pub", tmp_path / "outside"
    outside.mkdir()
    link = PLANTS[plant](out, outside)
    before = _snapshot(outside)
    refusal = one_line_refusal(_publish(world, out))
    assert f"{out / link} is a symbolic link" in refusal
    assert _snapshot(outside) == before
    assert (out / link).is_symlink()


def test_publish_refuses_a_linked_checkpoint(world: World, tmp_path: Path) -> None:
    """A link at OUT/checkpoint is neither read nor replaced, even when it points at the very
    checkpoint publish would write (the run would otherwise succeed)."""
    first, out, outside = tmp_path / "first", tmp_path / "pub", tmp_path / "outside"
    assert _publish(world, first).returncode == 0
    outside.mkdir()
    (outside / "checkpoint").write_bytes((first / "checkpoint").read_bytes())
    out.mkdir()
    (out / "checkpoint").symlink_to(outside / "checkpoint")
    refusal = one_line_refusal(_publish(world, out))
    assert f"{out / 'checkpoint'} is a symbolic link" in refusal
    assert (outside / "checkpoint").read_bytes() == (first / "checkpoint").read_bytes()
    assert (out / "checkpoint").is_symlink()


def test_publish_into_a_linked_out_itself_is_allowed(world: World, tmp_path: Path) -> None:
    """OUT itself may be a link (the operator named it); only links below it are refused."""
    real, out = tmp_path / "real", tmp_path / "pub"
    real.mkdir()
    out.symlink_to(real, target_is_directory=True)
    done = _publish(world, out)
    assert done.returncode == 0, done.stderr
    assert (real / "checkpoint").is_file() and (real / "explorer" / "index.html").is_file()
