"""Signing several messages at once (saihm.mldsa.mldsa65_sign_all, seal_with_receipt)."""

from __future__ import annotations

import os
import threading

import pytest
from dilithium_py.ml_dsa import ML_DSA_65

from saihm import mldsa
from saihm.errors import MalformedInput
from saihm.events.envelope import open_cell, seal, seal_with_receipt
from saihm.events.identity import HolderKey
from saihm.events.models import Operation, SealedPayload
from saihm.events.signing import (
    CELL_CONTEXT,
    RECEIPT_CONTEXT,
    cell_message,
    receipt_signed_bytes,
    verify_receipt,
)
from saihm.mldsa import mldsa65_from_seed, mldsa65_public_bytes, mldsa65_sign_all

PAYLOAD = SealedPayload(content="hello", session_id=bytes(32), namespace="memory", kind="memory")


def _items(n: int) -> list[tuple[bytes, bytes]]:
    return [(f"message {i}".encode(), f"ctx{i}".encode()) for i in range(n)]


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_each_signature_is_over_its_own_message_in_order(n: int) -> None:
    key = mldsa65_from_seed(os.urandom(32))
    public = mldsa65_public_bytes(key)
    signatures = mldsa65_sign_all(key, _items(n))
    assert len(signatures) == n
    for (message, context), signature in zip(_items(n), signatures, strict=True):
        # The second implementation checks each, and refuses it for a neighbour's message.
        assert ML_DSA_65.verify(public, message, signature, ctx=context)
        assert not ML_DSA_65.verify(public, message + b"!", signature, ctx=context)


def test_threads_signing_at_once_each_get_their_own_signatures() -> None:
    key = mldsa65_from_seed(os.urandom(32))
    public = mldsa65_public_bytes(key)
    made: list[tuple[bytes, bytes, bytes]] = []

    def sign(t: int) -> None:
        for i in range(5):
            items = [(f"{t}.{i}.a".encode(), b"a"), (f"{t}.{i}.b".encode(), b"b")]
            signatures = mldsa65_sign_all(key, items)
            made.extend((m, c, s) for (m, c), s in zip(items, signatures, strict=True))

    threads = [threading.Thread(target=sign, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Checked here, in one thread: dilithium-py's verify is not thread-safe.
    assert len(made) == 40
    assert all(ML_DSA_65.verify(public, m, s, ctx=c) for m, c, s in made)
    assert mldsa._under_way == 0


def test_a_forked_child_signs_with_threads_of_its_own() -> None:
    key = mldsa65_from_seed(os.urandom(32))
    mldsa65_sign_all(key, _items(2))  # the parent's threads exist now
    parent_pool = mldsa._pool
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            items = _items(2)
            signatures = mldsa65_sign_all(key, items)
            public = mldsa65_public_bytes(key)
            ok = all(
                ML_DSA_65.verify(public, m, s, ctx=c)
                for (m, c), s in zip(items, signatures, strict=True)
            )
            ok = ok and mldsa._pool is not None and mldsa._pool is not parent_pool
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    os.close(read)
    assert answer == b"1"
    assert mldsa._pool is parent_pool


def test_a_bad_context_is_refused_as_by_one_signature() -> None:
    key = HolderKey.from_seed(os.urandom(32))
    with pytest.raises(MalformedInput):
        key.sign_all([(b"m", b"ok"), (b"m", b"x" * 256)])
    with pytest.raises(MalformedInput):
        key.sign(b"m", b"x" * 256)
    assert mldsa._under_way == 0


def test_seal_with_receipt_makes_what_seal_and_sign_receipt_make() -> None:
    holder = HolderKey.from_seed(os.urandom(32))
    cell, dek, receipt = seal_with_receipt(
        PAYLOAD, key=holder, kek_version=3, tier="STANDARD", timestamp=1_700_000_000
    )
    assert open_cell(cell, dek, holder.public_key) == PAYLOAD
    verify_receipt(receipt, holder.public_key)
    assert (receipt.subject_id, receipt.operation) == (cell.cell_id, Operation.REMEMBER)
    assert (receipt.timestamp, cell.timestamp, cell.kek_version) == (1_700_000_000,) * 2 + (3,)
    assert ML_DSA_65.verify(
        holder.public_key, receipt_signed_bytes(receipt), receipt.signature, ctx=RECEIPT_CONTEXT
    )
    # The cell's signature, checked by the second implementation over the cell message.
    message = cell_message(cell.cell_id, holder.holder_id, 3, 1_700_000_000)
    assert ML_DSA_65.verify(holder.public_key, message, cell.signature, ctx=CELL_CONTEXT)
    other, _ = seal(PAYLOAD, key=holder, kek_version=3, tier="STANDARD", timestamp=1_700_000_000)
    assert other.cell_id != cell.cell_id  # a fresh DEK and nonce each time
