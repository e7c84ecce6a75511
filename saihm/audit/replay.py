"""``saihm replay``: rebuild the public projections of a bundle into LMDB or JSONL for research.

Only public data is replayed: receipts (by subject, holder and operation), holders' keys, the
erasure list, governance tallies (saihm.audit.derive, from the protocol's rules) and the
contract and grant events (SHARE, REVOKE, ACCEPT, DECLINE, GRANT, UNGRANT). Replay does not
verify; run ``saihm verify`` on the bundle first.

LMDB layout (named databases; u64 = 8-byte big-endian leaf index; values are JSON text):
``receipts`` u64 -> receipt; ``by_subject`` subjectId||u64; ``by_holder`` holderId||u64;
``by_operation`` operation||0x00||u64 (index keys have empty values); ``holders`` holderId ->
{"index", "publicKey"}; ``erasures`` cellId -> u64; ``tallies`` proposalId -> {"for",
"against", "abstain"}; ``events`` subjectId||u64 -> receipt. JSONL: one file per database
(``receipts.jsonl``, ``holders.jsonl``, ``erasures.jsonl``, ``tallies.jsonl``, ``events.jsonl``).
"""

from __future__ import annotations

import base64
import json
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from saihm.audit.bundle import read_bundle
from saihm.audit.derive import Derived
from saihm.audit.progress import progress
from saihm.errors import SaihmError
from saihm.events import Operation, Receipt
from saihm.events.operations import replay_events
from saihm.storage.lmdb import LmdbStorage

__all__ = ["ReplayOptions", "receipt_json", "run"]

_U64 = struct.Struct(">Q")
#: The operations also written to events.jsonl (the operation registry).
_EVENTS = replay_events()


def receipt_json(index: int, receipt: Receipt) -> dict:
    """The JSON form of a receipt: ids hex, the KEY detail base64, other details as maps."""
    detail: object = receipt.detail
    if isinstance(detail, bytes):
        detail = base64.b64encode(detail).decode()
    elif detail is not None:
        detail = receipt.detail_map()
    return {
        "index": index,
        "receiptId": receipt.receipt_id.hex(),
        "subjectId": receipt.subject_id.hex(),
        "operation": str(receipt.operation),
        "holderId": receipt.holder_id.hex(),
        "timestamp": receipt.timestamp,
        "detail": detail,
    }


def _every_tally(derived: Derived) -> list[tuple[bytes, list[int]]]:
    """A tally for every proposal, in log order: one with no VOTE yet tallies 0/0/0, so replay
    counts the proposals ``saihm verify`` counts."""
    return [(pid, derived.tallies.get(pid, [0, 0, 0])) for pid in derived.proposals]


class _Jsonl:
    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=False)
        self.files = {
            n: (out / f"{n}.jsonl").open("w")
            for n in ("receipts", "holders", "erasures", "tallies", "events")
        }

    def receipt(self, index: int, r: Receipt, doc: dict) -> None:
        self.files["receipts"].write(json.dumps(doc) + "\n")
        if r.operation in _EVENTS:
            self.files["events"].write(json.dumps(doc) + "\n")

    def finish(self, holders: dict, derived: Derived) -> None:
        for holder, (index, key) in holders.items():
            doc = {
                "holderId": holder.hex(),
                "index": index,
                "publicKey": base64.b64encode(key).decode(),
            }
            self.files["holders"].write(json.dumps(doc) + "\n")
        for cell, index in derived.erasures.items():
            self.files["erasures"].write(json.dumps({"cellId": cell.hex(), "index": index}) + "\n")
        for pid, (f, a, b) in _every_tally(derived):
            doc = {"proposalId": pid.hex(), "for": f, "against": a, "abstain": b}
            self.files["tallies"].write(json.dumps(doc) + "\n")
        for fh in self.files.values():
            fh.close()


class _Lmdb:
    def __init__(self, out: Path, size_hint: int) -> None:
        out.mkdir(parents=True, exist_ok=False)
        names = (
            "receipts",
            "by_subject",
            "by_holder",
            "by_operation",
            "holders",
            "erasures",
            "tallies",
            "events",
        )
        size = max(1 << 26, size_hint * 64)
        self.storage = LmdbStorage(out, [n.encode() for n in names], map_size=size)
        self.db = {n: self.storage.namespace(n.encode()) for n in names}
        self.txn = self.storage.write()

    def receipt(self, index: int, r: Receipt, doc: dict) -> None:
        idx, value, put = _U64.pack(index), json.dumps(doc).encode(), self.txn.put
        put(idx, value, db=self.db["receipts"])
        put(r.subject_id + idx, b"", db=self.db["by_subject"])
        put(r.holder_id + idx, b"", db=self.db["by_holder"])
        put(str(r.operation).encode() + b"\x00" + idx, b"", db=self.db["by_operation"])
        if r.operation in _EVENTS:
            put(r.subject_id + idx, value, db=self.db["events"])

    def finish(self, holders: dict, derived: Derived) -> None:
        put = self.txn.put
        for holder, (index, key) in holders.items():
            doc = {"index": index, "publicKey": base64.b64encode(key).decode()}
            put(holder, json.dumps(doc).encode(), db=self.db["holders"])
        for cell, index in derived.erasures.items():
            put(cell, _U64.pack(index), db=self.db["erasures"])
        for pid, (f, a, b) in _every_tally(derived):
            doc = {"for": f, "against": a, "abstain": b}
            put(pid, json.dumps(doc).encode(), db=self.db["tallies"])
        self.txn.commit()
        self.storage.close()


@dataclass(frozen=True)
class ReplayOptions:
    """``saihm replay FILE --out DIR [--format lmdb|jsonl]`` (parsed in saihm.commands.audit)."""

    bundle: str
    out: str
    format: str = "lmdb"
    no_progress: bool = False


def run(opts: ReplayOptions) -> int:
    """Replay ``opts.bundle`` into ``opts.out``; prints events/s at the end."""
    # Unreadable input raises (SaihmError, OSError): the command line prints it, exit 2.
    bundle = read_bundle(opts.bundle)
    out = Path(opts.out)
    sink = _Lmdb(out, len(bundle.leaves)) if opts.format == "lmdb" else _Jsonl(out)
    started = time.perf_counter()
    derived, holders, skipped = Derived(), {}, 0
    with progress(not opts.no_progress) as bar:
        advance = bar.task("replaying", len(bundle.leaves))
        for index, leaf in enumerate(bundle.leaves):
            try:
                receipt = Receipt.from_cbor(leaf)
            except SaihmError:
                skipped += 1
                continue
            if receipt.operation == Operation.KEY and receipt.holder_id not in holders:
                holders[receipt.holder_id] = (index, receipt.public_key)
            derived.apply(index, receipt)
            sink.receipt(index, receipt, receipt_json(index, receipt))
            if index % 1024 == 1023:
                advance(1024)
        sink.finish(holders, derived)
    seconds = time.perf_counter() - started
    rate = len(bundle.leaves) / seconds if seconds else None
    summary = {
        "out": opts.out,
        "format": opts.format,
        "events": len(bundle.leaves),
        "skipped": skipped,
        "seconds": seconds,
        "eventsPerSecond": rate,
    }
    summary.update(erasures=len(derived.erasures), proposals=len(derived.proposals))
    print(json.dumps(summary))
    return 0 if skipped == 0 else 1
