"""saihm-protocol "Erasure" (cryptographic class) and "Erasure properties".

After the wrapped DEK is destroyed and the generation in force is retired by one rotation, no
file under the data directory or the KEK directory lets anyone decrypt the cell, including a
backup of the data directory taken before the erasure.
"""

from __future__ import annotations

import os
import shutil

import pytest

from saihm.events import DecryptError, HolderKey, SealedPayload, open_cell, seal
from saihm.keyring import UnwrapError, unwrap

NOW = 1747526400


def _all_bytes(root) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def _existing_keks(kek_root) -> list[bytes]:
    """Every 32-byte window of every file in the KEK directory: a superset of its KEKs."""
    blobs = [p.read_bytes() for p in kek_root.rglob("*") if p.is_file()]
    return list({b[i : i + 32] for b in blobs for i in range(0, max(len(b) - 31, 0))})


def test_destroyed_dek_is_unrecoverable_after_one_rotation(
    tmp_path, data_dir, env, keyring, kek_dir
):
    holder = HolderKey.from_seed(os.urandom(32))
    payload = SealedPayload(
        content="forget me", session_id=b"\x01" * 32, namespace="memory", kind="memory"
    )
    cells = []
    with env.write() as txn:
        for _ in range(20):
            cell, dek = seal(payload, key=holder, kek_version=1, tier="STANDARD", timestamp=NOW)
            keyring.put_dek(txn, cell.cell_id, dek)
            cells.append((cell, dek))
    deks_db = env.namespace(b"deks")
    target, target_dek = cells[7]

    # Every wrapped value the target's DEK ever had: now, and after a first rotation.
    wrapped_values = []
    with env.read() as txn:
        wrapped_values.append(bytes(txn.get(target.cell_id, db=deks_db)))
    keyring.rotate()
    with env.read() as txn:
        wrapped_values.append(bytes(txn.get(target.cell_id, db=deks_db)))
    backup = tmp_path / "backup"
    shutil.copytree(env.location, backup)  # a backup taken before the erasure
    assert wrapped_values[1] in _all_bytes(backup)

    with env.write() as txn:
        assert keyring.destroy(txn, target.cell_id)
    keyring.rotate()  # retires the generation in force when the DEK was destroyed

    # The search: each stale wrapped value found anywhere unwraps under no surviving key.
    haystack = _all_bytes(data_dir) + _all_bytes(backup) + _all_bytes(kek_dir.path)
    candidates = _existing_keks(kek_dir.path)
    assert kek_dir.kek(kek_dir.current_version) in candidates
    found = 0
    for value in wrapped_values:
        if value in haystack:
            found += 1
        for kek in candidates:
            with pytest.raises(UnwrapError):
                unwrap(kek, value[4:])
    assert found >= 1  # the backup still holds a stale copy; it is the KEK that is gone
    assert target_dek not in haystack
    # Without the DEK no one opens the cell; the other cells still open.
    with pytest.raises(DecryptError):
        open_cell(target, os.urandom(32), holder.public_key)
    with env.read() as txn:
        for cell, _dek in cells:
            if cell is not target:
                assert open_cell(cell, keyring.dek(txn, cell.cell_id), holder.public_key)


def test_before_retirement_a_stale_copy_still_unwraps(env, keyring, kek_dir):
    """Why erasure is complete only at retirement: a copy made before destroy still unwraps
    while its generation is live."""
    with env.write() as txn:
        cell_id, dek = os.urandom(32), os.urandom(32)
        keyring.put_dek(txn, cell_id, dek)
        stale = bytes(txn.get(cell_id, db=env.namespace(b"deks")))
        keyring.destroy(txn, cell_id)
    assert unwrap(kek_dir.kek(1), stale[4:]) == dek
