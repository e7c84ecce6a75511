"""``saihm bench translog``: MerkleTree against pymerkle's SqliteTree on the same leaves.

Figures: batched append rate (batches of 1,000), median inclusion and consistency proof times at
historical sizes, and the root at an old size. Each figure carries pymerkle.SqliteTree's value
measured in the same run, and a ratio (peer time / our time, or our rate / peer rate).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from saihm.translog.tree import MerkleTree

__all__ = ["TranslogOptions", "run"]


def _median_us(fn, calls: list[tuple]) -> float:
    times = []
    for args in calls:
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def _figure(
    name: str, value: float, unit: str, peer: str, peer_value: float | None, higher_is_better: bool
) -> dict:
    ratio = None
    if peer_value:
        ratio = value / peer_value if higher_is_better else peer_value / value
    return {
        "bench": "translog",
        "figure": name,
        "value": round(value, 2),
        "unit": unit,
        "peer": peer,
        "peer_value": None if peer_value is None else round(peer_value, 2),
        "ratio": None if ratio is None else round(ratio, 2),
    }


@dataclass(frozen=True)
class TranslogOptions:
    """``--leaves`` in the tree and ``--samples`` proofs per figure."""

    leaves: int = 1_000_000
    samples: int = 2000


def run(opts: TranslogOptions) -> Iterator[dict]:
    """Yield one JSON-ready figure per measurement; ``--leaves N`` (default 1,000,000)."""
    n, rng = opts.leaves, random.Random(1)
    leaves = [i.to_bytes(8, "big") * 8 for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        from pymerkle import InmemoryTree, SqliteTree

        t0 = time.perf_counter()
        peer = SqliteTree(str(Path(tmp) / "peer.db"))
        for i in range(0, n, 1000):
            peer.append_entries(leaves[i : i + 1000])
        peer_rate = n / (time.perf_counter() - t0)
        with MerkleTree(Path(tmp) / "log") as tree:
            t0 = time.perf_counter()
            for i in range(0, n, 1000):
                tree.append_many(leaves[i : i + 1000])
            rate = n / (time.perf_counter() - t0)
            yield _figure(
                "append_leaves_per_s", rate, "leaves/s", "pymerkle.SqliteTree", peer_rate, True
            )
            sizes = [rng.randrange(n // 2, n + 1) for _ in range(opts.samples)]
            incl = [(rng.randrange(s), s) for s in sizes]
            cons = [(rng.randrange(1, s), s) for s in sizes]
            ours_incl = _median_us(tree.inclusion_proof, incl)
            theirs = _median_us(lambda i, s: peer.prove_inclusion(i + 1, s), incl[:200])
            yield _figure(
                "inclusion_proof_median", ours_incl, "us", "pymerkle.SqliteTree", theirs, False
            )
            ours = _median_us(tree.consistency_proof, cons)
            theirs = _median_us(peer.prove_consistency, cons[:200])
            yield _figure(
                "consistency_proof_median", ours, "us", "pymerkle.SqliteTree", theirs, False
            )
            olds = [(rng.randrange(1, n // 2),) for _ in range(opts.samples)]
            ours = _median_us(tree.root, olds)
            theirs = _median_us(peer.get_root, olds[:200])
            yield _figure(
                "root_at_old_size_median", ours, "us", "pymerkle.SqliteTree", theirs, False
            )
        peer.close()
        mem = InmemoryTree()
        mem.append_entries(leaves)
        theirs = _median_us(lambda i, s: mem.prove_inclusion(i + 1, s), incl[:200])
        yield _figure(
            "inclusion_proof_median", ours_incl, "us", "pymerkle.InmemoryTree", theirs, False
        )
