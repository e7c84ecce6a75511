"""A real operator over a temporary data directory, with an adjustable clock (tests/support)."""

from __future__ import annotations

from tests.support.world import world as world

__all__ = ["world"]
