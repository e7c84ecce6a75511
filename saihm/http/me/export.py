"""``GET /me/v1/export``: the person's memory as one file that ``saihm verify FILE`` checks.

An audit bundle (docs/formats.md §5) with no leaves of its own and the ``person`` member
(§5.1): every live cell of the holder that the person's own read path opens (every session,
records included, shared cells of others not), in plaintext with its labels, its signed cell
and the leaf index of its REMEMBER receipt; the holder's KEY receipt and each REMEMBER receipt
with an RFC 9162 inclusion proof to one signed checkpoint that covers them all. The read is the
person's (``Access.person``), so making the file logs no receipt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from saihm.audit.bundle import Bundle, PersonExport, PersonMemory
from saihm.errors import NotFound
from saihm.translog import verify_checkpoint

if TYPE_CHECKING:
    from saihm.operator import Operator
    from saihm.store import Access

__all__ = ["person_export"]


def _first_receipt(operator: Operator, subject: bytes) -> int:
    """The leaf index of the first receipt naming ``subject`` (a cell's REMEMBER, a holder's
    KEY)."""
    found, _ = operator.store.receipts("subjectId", subject, 0, 1)
    if not found:
        raise NotFound("a receipt is missing from the log")
    return found[0][0]


def person_export(operator: Operator, access: Access) -> bytes:
    """The person's export file (deterministic CBOR) for ``access`` (the person's own)."""
    store = operator.store
    opened = sorted(store.read(access, include_shared=False), key=lambda c: c.index)
    memories: list[PersonMemory] = []
    for item in opened:
        body = store.body(item.cell.cell_id)
        if body is None:  # erased since the read
            continue
        p = item.payload
        memories.append(
            PersonMemory(
                cell_id=item.cell.cell_id,
                plaintext=p.content,
                kind=p.kind,
                namespace=p.namespace,
                session_id=p.session_id,
                seq=p.seq,
                prev=p.prev,
                receipt=_first_receipt(operator, item.cell.cell_id),
                cell=body.object_cbor,
                supersedes=p.supersedes,
                metadata=p.metadata,
            )
        )
    # Signed after the read, so it covers every REMEMBER receipt read above.
    note = store.checkpoint_now()
    keys = list(store.log_keys.verifier_keys())
    size = verify_checkpoint(note, keys).size
    indexes = sorted({_first_receipt(operator, access.holder_id)} | {m.receipt for m in memories})
    receipts = [
        (i, store.leaves(i, i + 1)[0], store.inclusion_proof(i, size)) for i in indexes if i < size
    ]
    person = PersonExport(
        holder_id=access.holder_id, checkpoint=note, receipts=receipts, memories=memories
    )
    return Bundle(
        origin=store.origin,
        leaves=[],
        checkpoints=[],
        log_keys=keys,
        authority_public_key=store.authority_public_key,
        erasures=[],
        erasures_tree_size=0,
        person=person,
    ).to_cbor()
