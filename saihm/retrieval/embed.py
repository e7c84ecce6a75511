"""The semantic stage: an :class:`Embedder` and the optional local sentence-embedding model.

Embeddings reveal content, so they are kept in memory only, beside the cached plaintext they
were made from, and dropped with it (docs/retrieval.md "The cache"). The model is loaded from a
directory the operator names (``saihm serve --embedding-model DIR``): nothing is downloaded at
run time and it runs on the CPU. The loader needs the ``semantic`` extra
(``pip install 'saihm[semantic]'``, which brings sentence-transformers and PyTorch); CI never
installs it and tests the stage with a small deterministic embedder instead.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from saihm.errors import SaihmError

__all__ = [
    "INSTALL_HINT",
    "Embedder",
    "SemanticUnavailable",
    "check_semantic",
    "cosine",
    "load_embedder",
]

INSTALL_HINT = "the semantic stage needs the semantic extra: install saihm[semantic]"


class SemanticUnavailable(SaihmError):
    """The semantic stage cannot be loaded (extra missing, or no model in the directory)."""

    code = "semantic_unavailable"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors; similar meaning, nearby vectors.

    ``embed`` is called with the plaintext of cells as they enter the in-memory cache and with
    each query; it must be deterministic and must not write anything to disk or the network.
    """

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """One unit vector per text, in order."""
        ...


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The dot product of two unit vectors (their cosine similarity)."""
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


class _SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory, on the CPU."""

    def __init__(self, model: object) -> None:
        self._model = model

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        vectors = self._model.encode(  # type: ignore[attr-defined]
            list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return [tuple(float(x) for x in v) for v in vectors]


def check_semantic(model_dir: str | os.PathLike[str]) -> None:
    """Raise :class:`SemanticUnavailable` now, before serving, if :func:`load_embedder` would
    fail for want of the extra or of the directory (the model itself loads in each worker)."""
    import importlib.util

    if not Path(model_dir).is_dir():
        raise SemanticUnavailable("the embedding model directory does not exist")
    if importlib.util.find_spec("sentence_transformers") is None:
        raise SemanticUnavailable(INSTALL_HINT)


def load_embedder(model_dir: str | os.PathLike[str]) -> Embedder:
    """The sentence-embedding model saved in ``model_dir``, loaded offline on the CPU.

    Raises :class:`SemanticUnavailable` with :data:`INSTALL_HINT` when sentence-transformers is
    not installed, or when ``model_dir`` is not a directory holding a saved model.
    """
    path = Path(model_dir)
    if not path.is_dir():
        raise SemanticUnavailable("the embedding model directory does not exist")
    # Set before the import: the Hugging Face libraries read these once.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise SemanticUnavailable(INSTALL_HINT) from err
    try:
        model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    except Exception as err:  # the library raises many types for a directory it cannot read
        raise SemanticUnavailable("no sentence-transformers model in that directory") from err
    return _SentenceTransformerEmbedder(model)
