"""A real operator over a temporary data directory, with an adjustable clock (tests/support)."""

from __future__ import annotations

from tests.support.world import Clock, Holder, World, make_world
from tests.support.world import world as world
from tests.support.world import world_with as world_with

__all__ = ["Clock", "Holder", "World", "make_world"]
