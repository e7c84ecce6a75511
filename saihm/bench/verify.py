"""``saihm bench verify``: full offline verification against the ML-DSA-65 verify floor.

A bundle of ``--receipts`` receipts (KEY receipts for ``--holders`` holders, then REMEMBER
receipts, with a signed checkpoint every 256 leaves) is built in memory with saihm.events and
saihm.translog. The floor is bare ``mldsa65_verify`` over the same (key, message, signature)
triples, measured in the same run on one core. Figures: receipts verified per second by
``verify_bundle`` with one process, and with ``--workers`` processes; ratio = figure / floor
(DESIGN.md "Performance": target >= 0.8 on one core). Then the same log published as static
tiles and mirrored over HTTP by ``saihm mirror`` (one process): entries verified per second,
with the one-process bundle figure of the same run as the peer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from saihm.audit.bundle import Bundle
from saihm.audit.verifier import verify_bundle
from saihm.events import HolderKey, Operation, receipt_signed_bytes, sign_receipt
from saihm.events.signing import RECEIPT_CONTEXT
from saihm.mldsa import mldsa65_verify
from saihm.translog import Checkpoint, LogKeys, MemoryTree, MerkleTree

__all__ = ["VerifyOptions", "build_bundle", "run"]

_ORIGIN = "bench.saihm.localhost/log"


def build_bundle(receipts: int, holders: int) -> Bundle:
    """A consistent, signed bundle of ``receipts`` leaves (not timed)."""
    keys = [HolderKey.from_seed(os.urandom(32)) for _ in range(holders)]
    made = [
        sign_receipt(
            k, subject_id=k.holder_id, operation=Operation.KEY, timestamp=1, detail=k.public_key
        )
        for k in keys
    ]
    for i in range(receipts - holders):
        made.append(
            sign_receipt(
                keys[i % holders],
                subject_id=os.urandom(32),
                operation=Operation.REMEMBER,
                timestamp=2,
            )
        )
    leaves = [r.to_cbor() for r in made]
    log_keys = LogKeys.generate(_ORIGIN)
    checkpoints = []
    tree = MemoryTree(leaves)
    for size in sorted({*range(256, len(leaves), 256), len(leaves)}):
        cp = Checkpoint(_ORIGIN, size, tree.root(size))
        checkpoints.append((size, log_keys.sign(cp)))
    return Bundle(
        origin=_ORIGIN,
        leaves=leaves,
        checkpoints=checkpoints,
        log_keys=log_keys.verifier_keys(),
        authority_public_key=b"",
        erasures=[],
        erasures_tree_size=len(leaves),
    )


def _floor(bundle: Bundle) -> float:
    from saihm.events import Receipt

    keys: dict[bytes, bytes] = {}
    triples = []
    for leaf in bundle.leaves:
        r = Receipt.from_cbor(leaf)
        if r.operation == Operation.KEY:
            keys[r.holder_id] = r.public_key
        triples.append((keys[r.holder_id], r.signature, receipt_signed_bytes(r)))
    started = time.perf_counter()
    for public_key, signature, message in triples:
        mldsa65_verify(public_key, signature, message, RECEIPT_CONTEXT)
    return len(triples) / (time.perf_counter() - started)


def _figure(name: str, value: float, floor: float, **extra: object) -> dict:
    return {
        "bench": "verify",
        "figure": name,
        "value": round(value, 1),
        "unit": "receipts/s",
        "peer": "ML-DSA-65 verify floor (1 core)",
        "peer_value": round(floor, 1),
        "ratio": round(value / floor, 3),
        **extra,
    }


@dataclass(frozen=True)
class VerifyOptions:
    """``--receipts`` in the bundle, for ``--holders`` holders, verified by ``--workers``
    processes."""

    receipts: int = 3000
    holders: int = 8
    workers: int = min(4, os.cpu_count() or 1)


def run(opts: VerifyOptions) -> Iterator[dict]:
    """Yield the verify figures: floor, one process, ``--workers`` processes."""
    bundle = build_bundle(opts.receipts, opts.holders)
    floor = _floor(bundle)
    yield _figure("ml-dsa-65 verify floor", floor, floor, receipts=opts.receipts)
    for workers in sorted({1, opts.workers}):
        started = time.perf_counter()
        report = verify_bundle(bundle, workers=workers)
        seconds = time.perf_counter() - started
        if not report.ok:
            raise RuntimeError(f"bench bundle did not verify: {report.failures[0]}")
        yield _figure(
            f"saihm verify, {workers} process(es)",
            len(bundle.leaves) / seconds,
            floor,
            workers=workers,
            receipts=len(bundle.leaves),
        )
        if workers == 1:
            bundle_rate = len(bundle.leaves) / seconds
    yield from _mirror_figures(bundle, bundle_rate)


def _mirror_figures(bundle: Bundle, bundle_rate: float) -> Iterator[dict]:
    """``saihm mirror`` of the same log, published as static tiles, beside ``saihm verify``.

    The bundle's log is written as a tlog-tiles directory (``saihm publish``'s writer) and
    served by Python's ``http.server`` on 127.0.0.1; the figure is entries verified per second
    by one mirror run (one process), fetching every tile and entry bundle over HTTP, with the
    bundle verifier's one-process rate from the same run as the peer.
    """
    import socket
    import subprocess
    import sys
    import tempfile
    import urllib.request

    from saihm.audit.mirror import mirror
    from saihm.audit.publish import publish

    with tempfile.TemporaryDirectory(prefix="saihm-bench-mirror-") as tmp:
        with MerkleTree(f"{tmp}/tree") as tree:
            tree.append_many(bundle.leaves)
            reader = _TreeReader(tree, bundle.checkpoints[-1][1])
            publish(reader, f"{tmp}/pub", verifier_keys=bundle.log_keys)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        # A server process of its own, as a real static server would be (not a thread that
        # would compete with the mirror for the GIL).
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "http.server",
                str(port),
                "--bind",
                "127.0.0.1",
                "--directory",
                f"{tmp}/pub",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:  # bounded wait for the server to answer
                try:
                    urllib.request.urlopen(url + "/checkpoint", timeout=2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("the static server did not start") from None
                    time.sleep(0.05)
            started = time.perf_counter()
            outcome = mirror(url, f"{tmp}/mirror", trust=bundle.log_keys)
            seconds = time.perf_counter() - started
        finally:
            server.terminate()
            server.wait(timeout=30)
    if not outcome.ok:
        alarms = [str(a) for a in outcome.alarms]
        raise RuntimeError(f"bench mirror did not verify: {alarms or outcome.report}")
    rate = outcome.new_entries / seconds
    yield {
        "bench": "verify",
        "figure": "saihm mirror over HTTP (static tiles), 1 process",
        "value": round(rate, 1),
        "unit": "entries/s",
        "peer": "saihm verify on a bundle of the same log, 1 process",
        "peer_value": round(bundle_rate, 1),
        "ratio": round(rate / bundle_rate, 3),
        "receipts": outcome.new_entries,
    }


class _TreeReader:
    """The three reads ``publish`` needs, over a stand-alone MerkleTree and one signed note."""

    def __init__(self, tree: MerkleTree, note: bytes) -> None:
        self._tree, self._note = tree, note

    def checkpoint_now(self) -> bytes:
        return self._note

    def tile(self, level: int, index: int, width: int | None) -> bytes:
        return self._tree.tile(level, index, width)

    def entry_bundle(self, index: int, width: int | None) -> bytes:
        return self._tree.entry_bundle(index, width)
