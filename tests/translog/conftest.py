"""Fixtures for the translog tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.translog.reftree import vectors_dir


@pytest.fixture
def vectors() -> Path:
    return vectors_dir()
