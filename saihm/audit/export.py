"""``saihm export``, streamed: an audit bundle written from a data directory in bounded memory.

The bundle format is docs/formats.md §5 (``bundle.py``). ``stream_bundle`` writes the same bytes
as ``read_data_dir(...).to_cbor()`` but reads every leaf, checkpoint, cell and contract with an
LMDB cursor and writes it at once, so memory does not grow with the log.
"""

from __future__ import annotations

from pathlib import Path

from saihm.audit.bundle import FORMAT
from saihm.audit.datadir import CHECKPOINTS, LEAVES, public_view
from saihm.errors import MalformedInput
from saihm.events.codec import encode

__all__ = ["stream_bundle"]


def _head(major: int, n: int) -> bytes:
    """A CBOR head in its shortest form (RFC 8949 §4.2.1)."""
    if n < 24:
        return bytes([major << 5 | n])
    for extra, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([major << 5 | extra]) + n.to_bytes(size, "big")
    raise MalformedInput("length beyond CBOR's 64-bit range")


def stream_bundle(
    data_dir: str | Path, path: str | Path, *, with_cells: bool = False, store: str | None = None
) -> dict:
    """Write the bundle of ``data_dir`` to ``path`` without holding the log in memory.

    The output is byte-for-byte ``read_data_dir(...).to_cbor()`` (the tests check it): the map's
    keys in deterministic order, each large array written as a definite-length head (its count
    read from LMDB first, in the same read transaction) followed by its items one at a time.
    Written to a temporary file and renamed. ``store`` is the data directory's PostgreSQL store
    (``--store``; None: its LMDB store). Returns the counts and problems it found, as
    ``{"bytes", "leaves", "checkpoints", "cells", "problems": [(index, what)]}``.
    """
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    problems: list[tuple[int, str]] = []
    counts: dict[str, int | None] = {"cells": None}
    with public_view(data_dir, store=store) as view, tmp.open("wb") as out:
        n_leaves = view.count(LEAVES)
        n_cells = n_contracts = 0
        if with_cells:
            for _, _, is_contract in view.bodies():
                n_contracts += is_contract
                n_cells += not is_contract
        total = 0

        def put(data: bytes) -> None:
            nonlocal total
            out.write(data)
            total += len(data)

        def leaves() -> None:
            put(_head(4, n_leaves))
            for written, (index, leaf) in enumerate(view.leaves()):
                if index != written and not problems:
                    problems.append((written, f"leaf {written} is missing"))
                put(_head(2, len(leaf)) + leaf)

        def checkpoints() -> None:
            put(_head(4, view.count(CHECKPOINTS)))
            for size, note in view.checkpoints():
                put(encode([size, note]))

        def bodies(contracts: bool) -> None:
            put(_head(4, n_contracts if contracts else n_cells))
            for key, obj, is_contract in view.bodies():
                if is_contract == contracts:
                    put(encode([key, obj]))

        fields = {
            "format": lambda: put(encode(FORMAT)),
            "origin": lambda: put(encode(view.origin)),
            "leaves": leaves,
            "checkpoints": checkpoints,
            "logKeys": lambda: put(encode(list(view.log_keys))),
            "authorityPublicKey": lambda: put(encode(view.authority)),
            "erasures": lambda: put(encode([[c, i] for c, i in view.erasures()])),
            "erasuresTreeSize": lambda: put(encode(n_leaves)),
            "tallies": lambda: put(encode([list(t) for t in view.tallies()])),
        }
        if with_cells:
            fields["cells"] = lambda: bodies(False)
            fields["contracts"] = lambda: bodies(True)
        put(_head(5, len(fields)))
        for key in sorted(fields, key=encode):
            put(encode(key))
            fields[key]()
        counts = {"checkpoints": view.count(CHECKPOINTS), "cells": n_cells if with_cells else None}
    tmp.replace(target)
    return {"bytes": total, "leaves": n_leaves, **counts, "problems": problems}
