"""Check 7 of the verifier: the person's export (the bundle's ``person`` member), offline.

What ``saihm verify`` proves about each memory in the file (docs/formats.md §5.1):

- the checkpoint is signed by the log's keys (pinned with ``--trust``, else the file's own);
- every receipt is a strictly encoded receipt with a valid receiptId, the first is the
  holder's KEY receipt (holderId = SHA-256 of its key), each is signed by that key
  (ML-DSA-65, "SAIHM-RECEIPT-v1") and each is at its leaf index in the tree of that
  checkpoint (an RFC 9162 inclusion proof to the signed root);
- each memory's REMEMBER receipt is one of them, of this holder, and names the memory's cellId;
- the memory's signed cell is that cell: its cellId recomputed from kekVersion, cellNonce and
  ciphertext, its holder the file's, its signature ("SAIHM-CELL-v1") by the holder's key;
- the ciphertext is exactly as long as the memory's plaintext and labels sealed (the sealed
  payload's CBOR plus the 16-byte AES-GCM tag).

What it cannot prove: that the ciphertext decrypts to this plaintext. That needs the cell's
DEK, which never leaves the operator's one read path; a different text of the same encoded
length is caught by nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence

from saihm.audit.bundle import PersonExport
from saihm.audit.leafcheck import LeafChecker
from saihm.audit.leafcheck import short as _short
from saihm.audit.report import Report
from saihm.audit.sigcheck import Job, check_signatures
from saihm.errors import MalformedInput, SaihmError
from saihm.events import (
    CELL_CONTEXT,
    Cell,
    Operation,
    Receipt,
    SealedPayload,
    cell_message,
    check_cell_id,
)
from saihm.translog import leaf_hash, verify_checkpoint
from saihm.translog.verify import verify_inclusion

__all__ = ["GCM_TAG_BYTES", "check_person"]

#: The AES-256-GCM tag the ciphertext ends with (saihm-protocol "Encryption envelope").
GCM_TAG_BYTES = 16


def check_person(
    person: PersonExport, keys: Sequence[str], report: Report, *, second: bool = False
) -> None:
    """Check the person's export against the checkpoint keys ``keys``; record failures."""
    try:
        cp = verify_checkpoint(person.checkpoint, list(keys))
    except SaihmError as err:
        report.fail("person checkpoint", f"the checkpoint does not verify: {_short(err)}")
        return
    report.checkpoints += 1
    report.latest_size = cp.size
    receipts = _check_receipts(person, cp.size, cp.root_hash, report, second)
    _check_memories(person, receipts, report, second)


def _check_receipts(
    person: PersonExport, size: int, root: bytes, report: Report, second: bool
) -> dict[int, Receipt]:
    """Encoding, id, key, signature and inclusion of each receipt; the good ones by index."""
    checker = LeafChecker(report)
    good: dict[int, Receipt] = {}
    jobs: list[Job] = []
    previous = -1
    for position, (index, leaf, proof) in enumerate(person.receipts):
        if index <= previous:
            report.fail("person receipts", "receipts are not in log order", index)
            continue
        previous = index
        checked = checker.check(index, leaf)
        if checked is None:
            continue
        receipt, job = checked
        if receipt.holder_id != person.holder_id:
            report.fail("person receipts", "a receipt of another holder", index)
            continue
        if position == 0 and receipt.operation != Operation.KEY:
            report.fail("key", "the first receipt is not the holder's KEY receipt", index)
            continue
        jobs.append(job)  # its signature is checked whatever its inclusion
        try:
            verify_inclusion(leaf_hash(leaf), index, size, proof, root)
        except SaihmError as err:
            report.fail(
                "inclusion",
                f"receipt is not at leaf {index} of the signed checkpoint {size}: {_short(err)}",
                index,
            )
            continue
        good[index] = receipt
    for index, reason in check_signatures(jobs, second=second):
        report.fail("signature", f"receipt {reason}", index)
        good.pop(index, None)
    report.signatures += len(jobs)
    report.inclusion_proofs += len(good)
    return good


def _check_memories(
    person: PersonExport, receipts: dict[int, Receipt], report: Report, second: bool
) -> None:
    key = next((r.public_key for r in receipts.values() if r.operation == Operation.KEY), None)
    jobs: list[Job] = []
    seen: set[bytes] = set()
    for memory in person.memories:
        index = memory.receipt
        cell_hex = memory.cell_id.hex()
        if memory.cell_id in seen:
            report.fail("memory", f"cell {cell_hex} is listed twice", index)
            continue
        seen.add(memory.cell_id)
        receipt = receipts.get(index)
        if receipt is None:
            report.fail("memory", f"cell {cell_hex}: no checked receipt at leaf {index}", index)
            continue
        if receipt.operation != Operation.REMEMBER or receipt.subject_id != memory.cell_id:
            report.fail(
                "memory",
                f"the receipt at leaf {index} is not the REMEMBER of cell {cell_hex}",
                index,
            )
            continue
        try:
            cell = Cell.from_cbor(memory.cell)
            if cell.to_cbor() != memory.cell:
                raise MalformedInput("not the deterministic encoding of the cell")
            check_cell_id(cell)
        except SaihmError as err:
            report.fail("cell", f"cell {cell_hex}: {_short(err)}", index)
            continue
        if cell.cell_id != memory.cell_id or cell.holder_id != person.holder_id:
            report.fail("cell", f"the signed cell of {cell_hex} is another holder's or cell", index)
            continue
        if key is None:
            report.fail("key", "no checked KEY receipt to check the cell's signature", index)
            continue
        try:
            sealed = SealedPayload(
                content=memory.plaintext,
                session_id=memory.session_id,
                namespace=memory.namespace,
                kind=memory.kind,  # type: ignore[arg-type]
                seq=memory.seq,
                prev=memory.prev,
                supersedes=memory.supersedes,
                metadata=memory.metadata,
            ).to_cbor()
        except (SaihmError, ValueError) as err:
            report.fail("plaintext", f"cell {cell_hex}: not a sealed payload: {_short(err)}", index)
            continue
        if len(sealed) + GCM_TAG_BYTES != len(cell.ciphertext):
            report.fail(
                "plaintext",
                f"cell {cell_hex}: the plaintext and labels seal to {len(sealed)} bytes but the "
                f"signed ciphertext holds {len(cell.ciphertext) - GCM_TAG_BYTES}",
                index,
            )
            continue
        message = cell_message(cell.cell_id, cell.holder_id, cell.kek_version, cell.timestamp)
        jobs.append((index, key, message, cell.signature, CELL_CONTEXT))
        report.person_memories += 1
    for index, reason in check_signatures(jobs, second=second):
        report.fail("cell", f"cell {reason}", index)
        report.person_memories -= 1
