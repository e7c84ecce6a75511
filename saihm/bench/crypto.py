"""``saihm bench crypto``: ML-DSA-65 floors and the per-cell cost of sealing and opening.

Figures, measured in one run on one core:

- ``mldsa65_sign_per_s`` and ``mldsa65_verify_per_s``: bare hedged sign / verify of a
  cell message (76 bytes) through ``saihm.mldsa``; the floors every later figure is compared to;
- ``seal_sign_cells_per_s``: ``envelope.seal`` (fresh DEK and nonce, AES-256-GCM, cellId,
  cell signature) per second; ratio = figure / sign floor (the signature dominates);
- ``open_verify_cells_per_s``: ``envelope.open_cell`` (cellId, signature, decrypt, payload
  decode) per second; ratio = figure / verify floor.

Options: ``--seconds S`` per figure (default 1.0), ``--content-bytes N`` (default 256).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from saihm.events import HolderKey, SealedPayload, cell_message, open_cell, seal
from saihm.events.signing import CELL_CONTEXT
from saihm.mldsa import mldsa65_verify

__all__ = ["CryptoOptions", "run"]


def _rate(fn: Callable[[int], object], seconds: float) -> float:
    """Calls of ``fn(i)`` per second over at least ``seconds`` (after a short warm-up)."""
    for i in range(5):
        fn(i)
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(20):
            fn(count)
            count += 1
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start)


def _figure(figure: str, value: float, peer: str | None, peer_value: float | None) -> dict:
    return {
        "bench": "crypto",
        "figure": figure,
        "value": round(value, 1),
        "unit": "ops/s",
        "peer": peer,
        "peer_value": None if peer_value is None else round(peer_value, 1),
        "ratio": None if not peer_value else round(value / peer_value, 3),
    }


@dataclass(frozen=True)
class CryptoOptions:
    """``--seconds`` per figure and ``--content-bytes`` of each sealed cell."""

    seconds: float = 1.0
    content_bytes: int = 256


def run(opts: CryptoOptions) -> Iterator[dict]:
    """Yield the four figures described in the module docstring."""

    key = HolderKey.from_seed(os.urandom(32))
    message = cell_message(os.urandom(32), key.holder_id, 1, 1747526400)
    signature = key.sign(message, CELL_CONTEXT)
    payload = SealedPayload(
        content="x" * opts.content_bytes,
        session_id=os.urandom(32),
        namespace="memory",
        kind="memory",
    )

    sign_floor = _rate(lambda _i: key.sign(message, CELL_CONTEXT), opts.seconds)
    yield _figure("mldsa65_sign_per_s", sign_floor, None, None)
    verify_floor = _rate(
        lambda _i: mldsa65_verify(key.public_key, signature, message, CELL_CONTEXT), opts.seconds
    )
    yield _figure("mldsa65_verify_per_s", verify_floor, None, None)

    seal_rate = _rate(
        lambda i: seal(payload, key=key, kek_version=1, tier="STANDARD", timestamp=i),
        opts.seconds,
    )
    yield _figure("seal_sign_cells_per_s", seal_rate, "mldsa65_sign_per_s", sign_floor)

    sealed = [
        seal(payload, key=key, kek_version=1, tier="STANDARD", timestamp=i) for i in range(64)
    ]
    open_rate = _rate(
        lambda i: open_cell(sealed[i % 64][0], sealed[i % 64][1], key.public_key), opts.seconds
    )
    yield _figure("open_verify_cells_per_s", open_rate, "mldsa65_verify_per_s", verify_floor)
