"""``saihm bench witness``: what one cosigned checkpoint costs a witness, against its floor.

Figures, measured in one run on one core over a log of ``--size`` leaves that grows by
``--step`` leaves per checkpoint:

- ``witness_crypto_floor_per_s``: the cryptography every add-checkpoint must do and nothing
  else: verify the log's Ed25519 and ML-DSA-44 lines, verify the RFC 6962 consistency proof,
  sign an Ed25519 ``cosignature/v1`` and an ML-DSA-44 ``subtree/v1`` line;
- ``witness_add_checkpoint_per_s``: :meth:`saihm.services.witness.Witness.add_checkpoint` on
  the same requests (parse, the checks above, and the LMDB write transaction that is synced
  to disk before it returns); ratio = figure / floor;
- ``witness_add_checkpoint_nosync_per_s``: the same with the state opened without fsync,
  which shows how much of the gap is the disk; ratio = figure / floor.

Options: ``--seconds S`` per figure (default 1.0), ``--size N`` (default 100000),
``--step K`` (default 10).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saihm.translog import Checkpoint, LogKeys, MerkleTree, verify_consistency
from saihm.translog.checkpoint import verifier_from_key
from saihm.translog.note import open_note
from saihm.translog.witness import CosignatureV1Signer, SubtreeV1Signer, add_checkpoint_body

__all__ = ["WitnessOptions", "run"]

_ORIGIN = "bench.example/log"


def _figure(figure: str, value: float, peer: str | None, peer_value: float | None) -> dict:
    return {
        "bench": "witness",
        "figure": figure,
        "value": round(value, 1),
        "unit": "checkpoints/s",
        "peer": peer,
        "peer_value": None if peer_value is None else round(peer_value, 1),
        "ratio": None if not peer_value else round(value / peer_value, 3),
    }


def _requests(tree: MerkleTree, keys: LogKeys, base: int, step: int, count: int) -> list:
    """``count`` successive (old size, proof, note, root) steps from ``base``."""
    out = []
    for i in range(count):
        old, new = base + i * step, base + (i + 1) * step
        note = keys.sign(Checkpoint(_ORIGIN, new, tree.root(new)))
        out.append((old, tree.consistency_proof(old, new), note, tree.root(old), tree.root(new)))
    return out


@dataclass(frozen=True)
class WitnessOptions:
    """``--seconds`` per figure over a log of ``--size`` leaves growing by ``--step``."""

    seconds: float = 1.0
    size: int = 100_000
    step: int = 10


def run(opts: WitnessOptions) -> Iterator[dict]:
    """Yield the three figures described in the module docstring."""
    from saihm.services.witness import Witness
    from saihm.witness.state import WitnessState

    keys = LogKeys(_ORIGIN, Ed25519PrivateKey.generate(), os.urandom(32))
    ed25519 = CosignatureV1Signer("bench.example/w", Ed25519PrivateKey.generate())
    mldsa44 = SubtreeV1Signer("bench.example/w", os.urandom(32))
    verifiers = [verifier_from_key(k) for k in keys.verifier_keys()]
    with tempfile.TemporaryDirectory(prefix="saihm-bench-witness-") as tmp:
        tree = MerkleTree(os.path.join(tmp, "tree"))
        # Leaves for the base tree and for every step the timed loops may take.
        steps = max(50, int(opts.seconds * 4000))
        total = opts.size + steps * opts.step
        for start in range(0, total, 10_000):
            tree.append_many([b"leaf %d" % i for i in range(start, min(total, start + 10_000))])
        requests = _requests(tree, keys, opts.size, opts.step, steps)

        def floor(i: int) -> None:
            old, proof, note, old_root, new_root = requests[i % len(requests)]
            text, _ = open_note(note, verifiers)
            verify_consistency(old, old + opts.step, proof, old_root, new_root)
            ed25519.cosign(text)
            mldsa44.cosign(text)

        floor_rate = _rate(floor, opts.seconds, len(requests))
        yield _figure("witness_crypto_floor_per_s", floor_rate, None, None)
        runs = (
            ("witness_add_checkpoint_per_s", True),
            ("witness_add_checkpoint_nosync_per_s", False),
        )
        for name, sync in runs:
            state = WitnessState(os.path.join(tmp, f"state-{sync}"), sync=sync)
            witness = Witness(state, ed25519, keys.verifier_keys(), mldsa44=mldsa44)
            first = requests[0]
            witness.add_checkpoint(add_checkpoint_body(0, [], _note_at(keys, tree, first[0])))

            def add(i: int, witness: Witness = witness) -> None:
                old, proof, note, _, _ = requests[i]
                witness.add_checkpoint(add_checkpoint_body(old, proof, note))

            rate = _rate(add, opts.seconds, len(requests), cycle=False)
            state.close()
            yield _figure(name, rate, "witness_crypto_floor_per_s", floor_rate)
        tree.close()


def _note_at(keys: LogKeys, tree: MerkleTree, size: int) -> bytes:
    return keys.sign(Checkpoint(_ORIGIN, size, tree.root(size)))


def _rate(fn: Callable[[int], object], seconds: float, limit: int, *, cycle: bool = True) -> float:
    """Calls of ``fn(i)`` per second over ``seconds`` (at most ``limit`` calls unless
    ``cycle``, since each add-checkpoint request can be used once)."""
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while count < limit or cycle:
        fn(count)
        count += 1
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start)
    return count / (time.perf_counter() - start)
