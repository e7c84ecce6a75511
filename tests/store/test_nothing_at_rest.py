"""Plaintext and embeddings never rest on disk (docs/security.md; docs/retrieval.md "The
cache": "memory only"). After a run that remembers, records, recalls with and without the cache
and the semantic stage, shares and forgets, no file under the data, KEK or authority
directories holds a cell's plaintext or any embedding vector, in any encoding we can think of.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from pathlib import Path

from saihm.operator import Operator
from saihm.store import Store
from tests.support.postgres import lmdb_only
from tests.support.world import make_world

pytestmark = lmdb_only(
    "it scans the data directory's files; a PostgreSQL store's rows are on the server"
)


class MarkedEmbedder:
    """A deterministic test embedder whose vectors are easy to find: every component is a
    value derived from the text's hash, so a vector written anywhere would show up."""

    def __init__(self) -> None:
        self.vectors: list[tuple[float, ...]] = []

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        out = []
        for text in texts:
            digest = hashlib.sha256(text.encode()).digest()
            raw = [b / 255 + 0.001 for b in digest[:8]]
            norm = sum(x * x for x in raw) ** 0.5
            vector = tuple(x / norm for x in raw)
            self.vectors.append(vector)
            out.append(vector)
        return out


def encodings(vector: tuple[float, ...]) -> list[bytes]:
    return [
        struct.pack(f"<{len(vector)}d", *vector),
        struct.pack(f"<{len(vector)}f", *vector),
        struct.pack(f">{len(vector)}d", *vector),
        struct.pack(f">{len(vector)}f", *vector),
        repr(vector[0]).encode(),
    ]


def test_no_plaintext_or_embedding_on_disk(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    embedder = MarkedEmbedder()
    world.store.close()
    store = Store(world.config, clock=world.clock, embedder=embedder)
    world.operator = Operator(store, world.config)
    secrets_written = [f"PLAINTEXT-MARKER-{i}-quokka" for i in range(12)]
    a, b = world.holder(), world.holder()
    wide = world.grant_token(a.holder_id)
    cells = [world.call(a, "saihm_remember", content=text)["cellId"] for text in secrets_written]
    world.call(a, "saihm_record", content="RECORD-MARKER said quokka", kind="said")
    for query in ("", "quokka", "PLAINTEXT-MARKER-3-quokka", "what is a quokka"):
        world.call(wide, "saihm_recall", query=query)
        world.call(a, "saihm_recall", query=query, limit=3)
    world.share_accepted(a, b, cells[:2])
    world.call(b, "saihm_recall", query="quokka")
    world.call(a, "saihm_forget", id=cells[0])
    world.store.rotate_kek()
    world.call(wide, "saihm_recall", query="quokka")
    world.store.close()
    assert embedder.vectors, "the semantic stage ran"
    needles = [t.encode() for t in secrets_written] + [b"RECORD-MARKER", b"quokka"]
    needles += [e for v in embedder.vectors for e in encodings(v)]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "data.mdb" for p in files)
    for path in files:
        content = path.read_bytes()
        for needle in needles:
            assert needle not in content, f"{needle[:24]!r} found in {path.relative_to(tmp_path)}"
