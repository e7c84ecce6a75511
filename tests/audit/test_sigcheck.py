"""Signature checks handed to worker processes as they are found (``SignaturePool``), and the
mirror engine that uses them: the same failures, at the same indexes, with 1 or 2 workers."""

from __future__ import annotations

import os

import pytest

from saihm.audit.sigcheck import SignaturePool, check_signatures
from saihm.mldsa import mldsa65_from_seed, mldsa65_public_bytes, mldsa65_sign

_CONTEXT = b"saihm-test"


def _jobs(n: int, bad: set[int]) -> list[tuple[int, bytes, bytes, bytes, bytes]]:
    key = mldsa65_from_seed(bytes(32))
    public, message = mldsa65_public_bytes(key), b"a receipt's signed bytes"
    good = mldsa65_sign(key, message, _CONTEXT)
    wrong = bytes([good[0] ^ 1]) + good[1:]
    return [(i, public, message, wrong if i in bad else good, _CONTEXT) for i in range(n)]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_pool_reports_what_check_signatures_reports(workers: int) -> None:
    jobs = _jobs(300, {3, 299})  # more than one chunk of 256
    with SignaturePool(workers) as pool:
        for start in range(0, len(jobs), 100):  # handed over bundle by bundle
            pool.submit(jobs[start : start + 100])
        bad = pool.results()
        want = [(i, "ML-DSA-65 signature does not verify") for i in (3, 299)]
        assert bad == check_signatures(jobs) == want
        assert pool.results() == []  # each call reports what was handed over since the last
        pool.submit(jobs[:5])
        assert [i for i, _ in pool.results()] == [3]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bad_signature_in_a_consistent_log_is_found_with_workers(tmp_path, workers) -> None:
    """A receipt whose signature is wrong in a log whose tiles and checkpoint are right (the
    operator signed the tree of it): the mirror engine names that leaf, with or without
    worker processes checking signatures while it decodes the next bundles."""
    from saihm.audit.mirror import verify_log
    from saihm.audit.publish import publish
    from saihm.bench.verify import _TreeReader
    from saihm.events import HolderKey, Operation, sign_receipt
    from saihm.translog import Checkpoint, LogKeys, MemoryTree, MerkleTree

    holder = HolderKey.from_seed(os.urandom(32))
    made = [
        sign_receipt(
            holder,
            subject_id=holder.holder_id,
            operation=Operation.KEY,
            timestamp=1,
            detail=holder.public_key,
        )
    ]
    for _ in range(299):
        made.append(
            sign_receipt(
                holder, subject_id=os.urandom(32), operation=Operation.REMEMBER, timestamp=2
            )
        )
    leaves = [r.to_cbor() for r in made]
    leaf = bytearray(leaves[270])
    leaf[-40] ^= 1  # inside the signature: still a receipt, no longer a valid one
    leaves[270] = bytes(leaf)
    keys = LogKeys.generate("test.saihm.localhost/log")
    note = keys.sign(
        Checkpoint("test.saihm.localhost/log", len(leaves), MemoryTree(leaves).root(len(leaves)))
    )
    with MerkleTree(tmp_path / "tree") as tree:
        tree.append_many(leaves)
        publish(_TreeReader(tree, note), tmp_path / "pub", verifier_keys=keys.verifier_keys())
    outcome = verify_log(str(tmp_path / "pub"), workers=workers)
    failures = [(f.check, f.index) for f in outcome.report.failures]
    assert failures == [("signature", 270)] and not outcome.alarms
