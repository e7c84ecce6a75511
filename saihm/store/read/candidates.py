"""Which cells a read may consider: candidate hints from the projections, nothing decrypted.

Every record consulted here is MAC-bound (saihm/projections/seal.py): a forged or edited one
reads as absent, so it can only hide a cell, never offer one. The checked read path
(saihm/store/read/reader.py) decides on each candidate from the verified cell and its decrypted
label (requirements.txt: candidate indexes are hints; the label decides).
"""

from __future__ import annotations

from collections.abc import Iterable

from saihm.events import Cell, SealedPayload
from saihm.projections import Projections
from saihm.storage import ReadTxn
from saihm.store.auth import Access
from saihm.store.environment import Environment
from saihm.store.read.views import CellHeader

#: (leaf index, cellId, sharer): the sharer is None for the caller's own cells, else the holder
#: of the contract that covers the cell.
Candidate = tuple[int, bytes, bytes | None]


def label_allows(
    access: Access, cell: Cell | CellHeader, payload: SealedPayload, shared: bool
) -> bool:
    """The per-item check: the verified owner and the decrypted label against the access."""
    if access.namespaces is not None and payload.namespace not in access.namespaces:
        return False
    if shared:
        return access.consumer is None and cell.holder_id != access.holder_id
    if cell.holder_id != access.holder_id:
        return False
    return access.all_sessions or payload.session_id == access.session_id


def covered_cells(
    projections: Projections, txn: ReadTxn, grantee: bytes, now: int
) -> dict[bytes, bytes]:
    """Cells of other holders covered by a contract active for ``grantee``, each with the
    holder of the contract that covers it.

    saihm-protocol "Sharing contracts": a covered cell counts only if the contract's holder
    owns it; a contract cannot expose a third party's cell. The read path checks the verified
    cell's owner against the contract's holder again.
    """
    covered: dict[bytes, bytes] = {}
    for contract in projections.contracts.active_for(txn, grantee, now):
        for cell_id in contract.shards:
            record = projections.cells.get(txn, cell_id)
            if record is not None and record.owner == contract.holder != grantee:
                covered[cell_id] = contract.holder
    return covered


def candidates(
    env: Environment,
    txn: ReadTxn,
    access: Access,
    cell_ids: Iterable[bytes] | None,
    include_shared: bool,
    now: int,
) -> tuple[list[Candidate], list[Candidate]]:
    """Candidate triples: own cells (sharer None) and covered cells of other holders (sharer =
    the contract's holder, checked against the verified cell)."""
    records = env.projections
    own: list[Candidate] = []
    shared: list[Candidate] = []
    if cell_ids is not None:
        covered: dict[bytes, bytes] | None = None
        for cell_id in cell_ids:
            record = records.cells.get(txn, cell_id)
            if record is None:
                continue
            if record.owner == access.holder_id:
                own.append((record.index, cell_id, None))
                continue
            if not include_shared or access.consumer is not None:
                continue
            if covered is None:
                covered = covered_cells(records, txn, access.holder_id, now)
            if cell_id in covered:
                shared.append((record.index, cell_id, covered[cell_id]))
        return own, shared
    if access.all_sessions:
        listed = records.cells.live_of_holder(txn, access.holder_id)
    else:
        tag = env.session_tag(access.holder_id, access.own_session())
        listed = records.cells.live_of_session(txn, tag)
    for index, cell_id in listed:
        own.append((index, cell_id, None))
    if include_shared and access.consumer is None:
        for cell_id, sharer in sorted(covered_cells(records, txn, access.holder_id, now).items()):
            record = records.cells.get(txn, cell_id)
            if record is not None:
                shared.append((record.index, cell_id, sharer))
    return own, shared
