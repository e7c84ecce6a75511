"""The audit bundle: one self-contained file of everything a third party needs to verify a log.

Format (docs/formats.md §5): one deterministic CBOR map (RFC 8949 §4.2.1) with text keys::

    {"format": "saihm-audit-bundle/1", "origin": text, "leaves": [bytes, ...],
     "checkpoints": [[size, note-bytes], ...], "logKeys": [text, ...],
     "authorityPublicKey": bytes, "erasures": [[cellId, forgetIndex], ...],
     "erasuresTreeSize": uint, "tallies": [[proposalId, for, against, abstain], ...],
     "cells": [[subjectId, cell-cbor], ...], "contracts": [[subjectId, contract-cbor], ...]}

``cells`` and ``contracts`` are present only in bundles made ``--with-cells``.

``person`` is present only in the person's export (``GET /me/v1/export``, docs/formats.md §5.1):
the person's own memories in plaintext, each with its signed cell and its REMEMBER receipt, and
the holder's KEY receipt, each receipt with an RFC 9162 inclusion proof to one signed
checkpoint; such a bundle has no ``leaves`` or ``checkpoints`` of its own::

    "person": {"holderId": bytes, "checkpoint": note-bytes,
               "receipts": [[index, leaf, [hash, ...]], ...],
               "memories": [{"cellId": bytes, "plaintext": text, "kind": text,
                             "namespace": text, "sessionId": bytes, "seq": uint / null,
                             "prev": bytes / null, "receipt": index, "cell": cell-cbor}, ...]}

Apart from ``person`` (which the person asked for, and which is theirs), a bundle carries
no plaintext, no DEK or wrapped DEK, no KEK, no seed, no token and no session tag: leaves are
public receipts, cells are ciphertext in their wire form (saihm-protocol "Wire formats").
Decoding is strict (``saihm.events.codec.decode``) and every field is type-checked, so a
malformed bundle fails with ``MalformedInput`` before anything is verified.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from saihm.errors import MalformedInput
from saihm.events.codec import decode, encode
from saihm.events.errors import DecodeError

__all__ = ["FORMAT", "Bundle", "PersonExport", "PersonMemory", "read_bundle", "write_bundle"]

FORMAT = "saihm-audit-bundle/1"
_MEMORY_FIELDS = frozenset(
    {"cellId", "plaintext", "kind", "namespace", "sessionId", "seq", "prev", "receipt", "cell"}
)
#: A memory's sealed fields present only when the cell has them (docs/formats.md §3).
_MEMORY_OPTIONAL = frozenset({"supersedes", "metadata"})
_PERSON_FIELDS = frozenset({"holderId", "checkpoint", "receipts", "memories"})


@dataclass(frozen=True)
class PersonMemory:
    """One of the person's memories in their export: the plaintext and its labels (the sealed
    payload's fields), the leaf index of its REMEMBER receipt and the signed cell (wire CBOR,
    ciphertext)."""

    cell_id: bytes
    plaintext: str
    kind: str
    namespace: str
    session_id: bytes
    seq: int | None
    prev: bytes | None
    receipt: int
    cell: bytes
    supersedes: bytes | None = None
    metadata: str | None = None

    def to_map(self) -> dict[str, object]:
        optional = {"supersedes": self.supersedes, "metadata": self.metadata}
        return {
            **{name: value for name, value in optional.items() if value is not None},
            "cellId": self.cell_id,
            "plaintext": self.plaintext,
            "kind": self.kind,
            "namespace": self.namespace,
            "sessionId": self.session_id,
            "seq": self.seq,
            "prev": self.prev,
            "receipt": self.receipt,
            "cell": self.cell,
        }

    @classmethod
    def from_map(cls, m: object) -> PersonMemory:
        if not isinstance(m, dict) or not _MEMORY_FIELDS <= set(m) <= (
            _MEMORY_FIELDS | _MEMORY_OPTIONAL
        ):
            raise MalformedInput(
                f"bundle person memory must have the fields {sorted(_MEMORY_FIELDS)} "
                f"(and may have {sorted(_MEMORY_OPTIONAL)})"
            )
        return cls(
            cell_id=_typed(m["cellId"], bytes, "person memory cellId"),
            plaintext=_typed(m["plaintext"], str, "person memory plaintext"),
            kind=_typed(m["kind"], str, "person memory kind"),
            namespace=_typed(m["namespace"], str, "person memory namespace"),
            session_id=_typed(m["sessionId"], bytes, "person memory sessionId"),
            seq=None if m["seq"] is None else _typed(m["seq"], int, "person memory seq"),
            prev=None if m["prev"] is None else _typed(m["prev"], bytes, "person memory prev"),
            receipt=_typed(m["receipt"], int, "person memory receipt"),
            cell=_typed(m["cell"], bytes, "person memory cell"),
            supersedes=(
                _typed(m["supersedes"], bytes, "person memory supersedes")
                if "supersedes" in m
                else None
            ),
            metadata=(
                _typed(m["metadata"], str, "person memory metadata") if "metadata" in m else None
            ),
        )


@dataclass(frozen=True)
class PersonExport:
    """The ``person`` member: whose memory, the signed checkpoint every inclusion proof leads
    to, the receipts (leaf index, leaf, proof) in log order and the memories."""

    holder_id: bytes
    checkpoint: bytes
    receipts: list[tuple[int, bytes, list[bytes]]]
    memories: list[PersonMemory]

    def to_map(self) -> dict[str, object]:
        return {
            "holderId": self.holder_id,
            "checkpoint": self.checkpoint,
            "receipts": [[i, leaf, list(proof)] for i, leaf, proof in self.receipts],
            "memories": [m.to_map() for m in self.memories],
        }

    @classmethod
    def from_map(cls, m: object) -> PersonExport:
        if not isinstance(m, dict) or set(m) != _PERSON_FIELDS:
            raise MalformedInput(f"bundle person must have the fields {sorted(_PERSON_FIELDS)}")
        receipts: list[tuple[int, bytes, list[bytes]]] = []
        for r in _typed(m["receipts"], list, "person receipts"):
            if not isinstance(r, list) or len(r) != 3:
                raise MalformedInput("bundle person receipt is not [index, leaf, proof]")
            proof = [_typed(h, bytes, "proof hash") for h in _typed(r[2], list, "proof")]
            receipts.append(
                (_typed(r[0], int, "receipt index"), _typed(r[1], bytes, "leaf"), proof)
            )
        return cls(
            holder_id=_typed(m["holderId"], bytes, "person holderId"),
            checkpoint=_typed(m["checkpoint"], bytes, "person checkpoint"),
            receipts=receipts,
            memories=[
                PersonMemory.from_map(x) for x in _typed(m["memories"], list, "person memories")
            ],
        )


@dataclass
class Bundle:
    """The contents of an audit bundle (bytes inside; see the module docstring for the wire)."""

    origin: str
    leaves: list[bytes]
    checkpoints: list[tuple[int, bytes]]
    log_keys: list[str]
    authority_public_key: bytes
    erasures: list[tuple[bytes, int]]
    erasures_tree_size: int
    tallies: list[tuple[bytes, int, int, int]] = field(default_factory=list)
    cells: list[tuple[bytes, bytes]] | None = None
    contracts: list[tuple[bytes, bytes]] | None = None
    person: PersonExport | None = None
    # Problems found while reading a data directory (e.g. a gap in the leaf indexes); not
    # part of the wire format: a bundle written from such a directory simply lacks the leaf.
    read_problems: list[tuple[int, str]] = field(default_factory=list)

    def to_cbor(self) -> bytes:
        """The deterministic CBOR encoding of the bundle."""
        m: dict[str, object] = {
            "format": FORMAT,
            "origin": self.origin,
            "leaves": list(self.leaves),
            "checkpoints": [[size, note] for size, note in self.checkpoints],
            "logKeys": list(self.log_keys),
            "authorityPublicKey": self.authority_public_key,
            "erasures": [[cell_id, index] for cell_id, index in self.erasures],
            "erasuresTreeSize": self.erasures_tree_size,
            "tallies": [list(t) for t in self.tallies],
        }
        if self.cells is not None:
            m["cells"] = [[k, v] for k, v in self.cells]
        if self.contracts is not None:
            m["contracts"] = [[k, v] for k, v in self.contracts]
        if self.person is not None:
            m["person"] = self.person.to_map()
        return encode(m)

    @classmethod
    def from_cbor(cls, data: bytes) -> Bundle:
        """Decode a bundle strictly; raise ``MalformedInput`` naming the first bad field."""
        try:
            m = decode(data)
        except DecodeError as err:
            raise MalformedInput(f"bundle is not deterministic CBOR: {err}") from err
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            raise MalformedInput(f"not a {FORMAT} file")
        need = {
            "origin",
            "leaves",
            "checkpoints",
            "logKeys",
            "authorityPublicKey",
            "erasures",
            "erasuresTreeSize",
            "tallies",
            "format",
        }
        if not need <= m.keys() or not m.keys() <= need | {"cells", "contracts", "person"}:
            raise MalformedInput("bundle fields are missing or unknown")
        origin = _typed(m["origin"], str, "origin")
        leaves = [_typed(x, bytes, "leaf") for x in _typed(m["leaves"], list, "leaves")]
        checkpoints = [
            (_typed(s, int, "checkpoint size"), _typed(n, bytes, "checkpoint note"))
            for s, n in _pairs(m["checkpoints"], "checkpoints")
        ]
        keys = [_typed(k, str, "log key") for k in _typed(m["logKeys"], list, "logKeys")]
        erasures = [
            (_typed(c, bytes, "erased cellId"), _typed(i, int, "erasure index"))
            for c, i in _pairs(m["erasures"], "erasures")
        ]
        tallies: list[tuple[bytes, int, int, int]] = []
        for t in _typed(m["tallies"], list, "tallies"):
            if not isinstance(t, list) or len(t) != 4 or not isinstance(t[0], bytes):
                raise MalformedInput("bundle tally is not [proposalId, for, against, abstain]")
            votes = [_typed(x, int, "tally") for x in t[1:]]
            tallies.append((t[0], votes[0], votes[1], votes[2]))
        cells = contracts = None
        if "cells" in m:
            cells = [
                (_typed(k, bytes, "cell key"), _typed(v, bytes, "cell"))
                for k, v in _pairs(m["cells"], "cells")
            ]
        if "contracts" in m:
            contracts = [
                (_typed(k, bytes, "contract key"), _typed(v, bytes, "contract"))
                for k, v in _pairs(m["contracts"], "contracts")
            ]
        return cls(
            origin=origin,
            leaves=leaves,
            checkpoints=checkpoints,
            log_keys=keys,
            authority_public_key=_typed(m["authorityPublicKey"], bytes, "authorityPublicKey"),
            erasures=erasures,
            erasures_tree_size=_typed(m["erasuresTreeSize"], int, "size"),
            tallies=tallies,
            cells=cells,
            contracts=contracts,
            person=PersonExport.from_map(m["person"]) if "person" in m else None,
        )


_T = TypeVar("_T")


def _typed(value: object, kind: type[_T], what: str) -> _T:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MalformedInput(f"bundle {what} has the wrong type")
    return value


def _pairs(value: object, what: str) -> list[list[Any]]:
    items = _typed(value, list, what)
    for item in items:
        if not isinstance(item, list) or len(item) != 2:
            raise MalformedInput(f"bundle {what} entry is not a pair")
    return items


def write_bundle(bundle: Bundle, path: str | Path) -> int:
    """Write ``bundle`` to ``path`` atomically (temp file + rename); return its size in bytes."""
    data = bundle.to_cbor()
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(target)
    return len(data)


def read_bundle(path: str | Path) -> Bundle:
    """Read and strictly decode a bundle file; raise ``MalformedInput``."""
    return Bundle.from_cbor(Path(path).read_bytes())
