"""What a backup keeps of a forgotten cell (docs/operations.md "Backups and restore").

Compaction drops LMDB's free pages, but a live page keeps the slack a deleted record left, so
the bytes of a destroyed wrapped DEK can ride along into a backup. Erasure therefore does not
rest on the copy: it rests on the KEK generation those bytes are wrapped under being retired.
"""

from __future__ import annotations

import pytest

from saihm.keyring.errors import KekUnavailable
from saihm.keyring.kekdir import KekDirectory
from saihm.offline.backup import backup


def test_a_forgotten_cells_wrapped_dek_in_a_backup_is_under_a_retired_kek(world, tmp_path) -> None:
    """The world forgot gamma, then rotated the KEK: whatever a backup carries of gamma's
    wrapped DEK can no longer be unwrapped."""
    report = backup(world.config, tmp_path / "copy")
    copy = (tmp_path / "copy" / "lmdb" / "data.mdb").read_bytes()
    assert report.lmdb_bytes == len(copy)
    wrapped = world.old_dek_gamma
    version = int.from_bytes(wrapped[:4], "big")  # kekVersion of the wrapping, then the key
    keks = KekDirectory(world.config.kek_dir)
    assert version in keks.retired_versions() and version != keks.current_version
    with pytest.raises(KekUnavailable):
        keks.kek(version)
