"""The offline verifier: everything a bundle claims, checked with saihm.translog and saihm.events.

Checks, in this order (the report's first failure is the first in this order, lowest leaf first):

1. every leaf is a strictly, deterministically encoded receipt (saihm-protocol "Wire formats")
   whose receiptId is SHA-256 of its signed bytes, no receiptId repeats, and whose holder has an
   earlier KEY receipt (or which is that KEY receipt, bound by holderId = SHA-256(public key));
2. every receipt's ML-DSA-65 signature (context "SAIHM-RECEIPT-v1"), optionally in worker
   processes and re-verified with pqcrypto;
3. every stored checkpoint: its signatures under the pinned (or, unpinned, the bundle's own)
   verifier keys, its root recomputed from the leaves, and RFC 9162 consistency with the
   previous checkpoint, using proofs computed from the leaves;
4. every externally held checkpoint (e.g. from a monitor): signed, not larger than the bundle
   (else the log was truncated) and with the root of the bundle's first ``size`` leaves (else it
   was rewritten);
5. the erasure list and governance tallies rebuilt from the receipts equal what the operator
   publishes (saihm-protocol "Erasure", "Governance form");
6. with cells: each cell's id, its filing key, its REMEMBER receipt and its signature
   (context "SAIHM-CELL-v1"); each contract's id, SHARE receipt and signature;
7. a person's export (the ``person`` member): its checkpoint, receipts with inclusion proofs,
   and each memory against its cell and REMEMBER receipt (saihm/audit/personcheck.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from saihm.audit.bundle import Bundle
from saihm.audit.derive import Derived
from saihm.audit.leafcheck import LeafChecker
from saihm.audit.leafcheck import short as _short
from saihm.audit.progress import Progress
from saihm.audit.report import Report
from saihm.audit.sigcheck import Job, check_signatures
from saihm.errors import MalformedInput, SaihmError
from saihm.events import (
    CELL_CONTEXT,
    Cell,
    Contract,
    Operation,
    Receipt,
    cell_message,
    check_cell_id,
    verify_contract,
)
from saihm.translog import (
    MemoryTree,
    verify_checkpoint,
    verify_consistency,
)

__all__ = ["verify_bundle"]


def verify_bundle(
    bundle: Bundle,
    *,
    trusted_keys: Sequence[str] | None = None,
    held: Sequence[bytes] = (),
    second_implementation: bool = False,
    workers: int = 1,
    progress: Progress | None = None,
    source: str = "",
) -> Report:
    """Verify ``bundle`` completely and return the report (``report.ok`` iff all held).

    ``trusted_keys`` are checkpoint verifier keys pinned by the caller; without them the
    bundle's own keys are used and the report says so. ``held`` are signed checkpoint notes the
    caller obtained elsewhere. Never raises for a bad bundle: every problem is a failure.
    """
    bar = progress or Progress()
    report = Report(source=source, origin=bundle.origin, leaves=len(bundle.leaves))
    report.second_implementation = second_implementation
    for index, what in bundle.read_problems:
        report.fail("leaves", what, index)
    keys, receipts, derived = _check_leaves(bundle, report, bar, second_implementation, workers)
    _check_tree(bundle, report, bar, trusted_keys, held)
    _check_published(bundle, report, derived)
    if bundle.cells is not None or bundle.contracts is not None:
        _check_bodies(bundle, report, keys, receipts, second_implementation)
    if bundle.person is not None:
        from saihm.audit.personcheck import check_person

        report.person = True
        check_keys = list(trusted_keys) if trusted_keys else list(bundle.log_keys)
        check_person(bundle.person, check_keys, report, second=second_implementation)
    return report


def _check_leaves(
    bundle: Bundle, report: Report, bar: Progress, second: bool, workers: int
) -> tuple[dict[bytes, bytes], dict[bytes, tuple[int, Receipt]], Derived]:
    """Checks 1 and 2; returns holder keys, receipts by subject (first), the derived state."""
    checker = LeafChecker(report)
    by_subject: dict[bytes, tuple[int, Receipt]] = {}
    derived = Derived()
    jobs: list[Job] = []
    advance = bar.task("decoding receipts", len(bundle.leaves))
    for index, leaf in enumerate(bundle.leaves):
        if index % 512 == 511:
            advance(512)
        checked = checker.check(index, leaf)
        if checked is None:
            continue
        receipt, job = checked
        jobs.append(job)
        by_subject.setdefault(receipt.subject_id, (index, receipt))
        derived.apply(index, receipt)
    advance(len(bundle.leaves) % 512)
    advance = bar.task("verifying signatures", len(jobs))
    bad = check_signatures(jobs, workers=workers, second=second, progress=advance)
    for index, reason in bad:
        report.fail("signature", f"receipt {reason}", index)
    report.signatures = len(jobs)
    report.failures.sort(key=lambda f: (f.index is None, f.index or 0))
    return dict(checker.keys), by_subject, derived


def _check_tree(
    bundle: Bundle,
    report: Report,
    bar: Progress,
    trusted_keys: Sequence[str] | None,
    held: Sequence[bytes],
) -> None:
    """Checks 3 and 4 over the Merkle tree rebuilt in memory from the leaves."""
    keys = list(trusted_keys) if trusted_keys else list(bundle.log_keys)
    report.keys_pinned = bool(trusted_keys)
    n = len(bundle.leaves)
    tree = MemoryTree()
    try:
        for start in range(0, n, 4096):
            tree.append_many(bundle.leaves[start : start + 4096])
    except SaihmError as err:
        report.fail("tree", f"cannot rebuild the tree: {_short(err)}", start)
        return
    advance = bar.task("checking checkpoints", len(bundle.checkpoints) + len(held))
    prev_size, prev_root = 0, None
    for filed_size, note in sorted(bundle.checkpoints):
        advance(1)
        try:
            cp = verify_checkpoint(note, keys)
        except SaihmError as err:
            report.fail("checkpoint", f"checkpoint {filed_size}: {_short(err)}", filed_size)
            continue
        report.checkpoints += 1
        if cp.size != filed_size:
            report.fail("checkpoint", f"filed under size {filed_size}, signs {cp.size}")
            continue
        if cp.size > n:
            report.fail(
                "truncation",
                f"signed checkpoint of size {cp.size} but only {n} leaves: the log was truncated",
                n,
            )
            continue
        if tree.root(cp.size) != cp.root_hash:
            report.fail(
                "root",
                f"leaves {prev_size}..{cp.size - 1} do not hash to the signed root of "
                f"checkpoint {cp.size}",
                prev_size,
            )
            continue
        if prev_root is not None and prev_size > 0:
            try:
                proof = tree.consistency_proof(prev_size, cp.size)
                verify_consistency(prev_size, cp.size, proof, prev_root, cp.root_hash)
                report.consistency_proofs += 1
            except SaihmError as err:
                report.fail(
                    "consistency", f"checkpoint {prev_size} -> {cp.size}: {_short(err)}", prev_size
                )
                continue
        prev_size, prev_root = cp.size, cp.root_hash
    report.latest_size = prev_size
    if prev_size < n:
        report.notes.append(
            f"leaves {prev_size}..{n - 1} are not yet covered by a signed checkpoint in the bundle"
        )
    for note in held:
        advance(1)
        _check_held(note, keys, tree, n, report)


def _check_held(note: bytes, keys: list[str], tree: MemoryTree, n: int, report: Report) -> None:
    try:
        cp = verify_checkpoint(note, keys)
    except SaihmError as err:
        report.fail("held checkpoint", f"does not verify: {_short(err)}")
        return
    report.held_checkpoints += 1
    if cp.size > n:
        report.fail(
            "truncation",
            f"a held checkpoint of size {cp.size} is larger than the "
            f"bundle's {n} leaves: the log was truncated",
            n,
        )
    elif tree.root(cp.size) != cp.root_hash:
        what = f"the first {cp.size} leaves do not hash to a held checkpoint's root: rewritten"
        report.fail("rewrite", what, cp.size - 1 if cp.size else None)


def _check_published(bundle: Bundle, report: Report, derived: Derived) -> None:
    """Check 5: the erasure list and tallies the operator publishes, against the receipts."""
    rebuilt = derived.erasures_before(bundle.erasures_tree_size)
    published = dict(bundle.erasures)
    for cell_id, index in sorted(published.items(), key=lambda kv: kv[1]):
        if cell_id not in rebuilt:
            report.fail(
                "erasures",
                f"the published erasure list names cell {cell_id.hex()} but "
                "no FORGET receipt in the log erases it",
                index,
            )
        elif rebuilt[cell_id] != index:
            report.fail(
                "erasures",
                f"published FORGET index {index} for cell {cell_id.hex()} "
                f"but the receipt is at leaf {rebuilt[cell_id]}",
                index,
            )
    for cell_id, index in sorted(rebuilt.items(), key=lambda kv: kv[1]):
        if cell_id not in published:
            report.fail(
                "erasures",
                f"FORGET receipt for cell {cell_id.hex()} is missing from "
                "the published erasure list",
                index,
            )
    report.erasures = len(rebuilt)
    tallies = {pid: [f, a, b] for pid, f, a, b in bundle.tallies}
    for pid in sorted(set(tallies) | set(derived.tallies)):
        mine, theirs = derived.tallies.get(pid, [0, 0, 0]), tallies.get(pid, [0, 0, 0])
        if mine != theirs:
            report.fail(
                "tallies",
                f"proposal {pid.hex()}: published tally {theirs} but the VOTE receipts give {mine}",
                derived.proposals.get(pid),
            )
    report.proposals = len(derived.proposals)


def _check_bodies(
    bundle: Bundle,
    report: Report,
    keys: dict[bytes, bytes],
    receipts: dict[bytes, tuple[int, Receipt]],
    second: bool,
) -> None:
    """Check 6: stored cells and contracts (ciphertext only) against their receipts."""
    jobs: list[Job] = []
    # In log order of their REMEMBER receipts, so the first failure is the earliest leaf.
    ordered = sorted(bundle.cells or [], key=lambda kv: receipts.get(kv[0], (1 << 64,))[0])
    for key, raw in ordered:
        index = receipts.get(key, (None, None))[0]
        try:
            cell = Cell.from_cbor(raw)
            if cell.to_cbor() != raw:
                raise MalformedInput("not the deterministic encoding of the cell")
            check_cell_id(cell)
        except SaihmError as err:
            report.fail("cell", f"cell {key.hex()}: {_short(err)}", index)
            continue
        if cell.cell_id != key:
            report.fail(
                "cell",
                f"the cell stored under {key.hex()} is cell {cell.cell_id.hex()}: "
                "cells were swapped or moved",
                index,
            )
            continue
        remembered = receipts.get(key)
        if remembered is None or remembered[1].operation != Operation.REMEMBER:
            report.fail("cell", f"cell {key.hex()} has no REMEMBER receipt", index)
            continue
        public_key = keys.get(cell.holder_id)
        if public_key is None or remembered[1].holder_id != cell.holder_id:
            report.fail("cell", f"cell {key.hex()} names a holder other than its receipt's", index)
            continue
        message = cell_message(cell.cell_id, cell.holder_id, cell.kek_version, cell.timestamp)
        jobs.append((remembered[0], public_key, message, cell.signature, CELL_CONTEXT))
        report.cells += 1
    for index, reason in check_signatures(jobs, second=second):
        report.fail("cell", f"cell {reason}", index)
    for key, raw in bundle.contracts or []:
        index = receipts.get(key, (None, None))[0]
        try:
            contract = Contract.from_cbor(raw)
            if contract.contract_id != key:
                raise MalformedInput("contract is stored under another contractId")
            if index is None or receipts[key][1].operation != Operation.SHARE:
                raise MalformedInput("contract has no SHARE receipt")
            verify_contract(contract, keys.get(contract.holder_id, b""))
        except SaihmError as err:
            report.fail("contract", f"contract {key.hex()}: {_short(err)}", index)
            continue
        report.contracts += 1
