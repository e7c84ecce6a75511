"""The semantic stage: an :class:`Embedder` and the optional local sentence-embedding model.

Embeddings reveal content, so they are kept in memory only, beside the cached plaintext they
were made from, and dropped with it (docs/retrieval.md "The cache"). The model is loaded from a
directory: the bundled all-MiniLM-L6-v2 that ``saihm serve`` uses by default
(:mod:`saihm.retrieval.bundled`), or the one the operator names (``saihm serve
--embedding-model DIR``): a Hugging Face / sentence-transformers folder holding
``tokenizer.json`` and ``onnx/model.onnx`` (or ``model.onnx``), optionally
``1_Pooling/config.json``, ``modules.json`` and ``sentence_bert_config.json``. It runs on the
CPU with onnxruntime and the ``tokenizers`` library (base dependencies, no PyTorch); nothing is
downloaded at run time.

The sentence vector is what sentence-transformers computes for such a folder (its
``modules.json``: Transformer, Pooling, Normalize): the token embeddings of the model's first
output, pooled as ``1_Pooling/config.json`` says (mean over the attention mask by default, as
all-MiniLM-L6-v2 does; CLS and max are also read), then L2-normalised.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from saihm.errors import SaihmError

__all__ = [
    "INSTALL_HINT",
    "Embedder",
    "OnnxEmbedder",
    "SemanticUnavailable",
    "VectorTable",
    "check_semantic",
    "cosine",
    "cosines",
    "load_embedder",
    "model_files",
    "row_products",
]

INSTALL_HINT = (
    "the semantic stage needs onnxruntime, tokenizers and numpy (saihm's own dependencies): "
    "pip install 'saihm[semantic]', or serve with --embedding-model none"
)

#: The longest input in tokens when the folder does not say (sentence-transformers' default
#: ``max_seq_length`` for all-MiniLM-L6-v2).
DEFAULT_MAX_TOKENS = 256
#: Texts embedded per model call (bounds the padded batch's memory).
BATCH = 64
#: onnxruntime's intra-op threads (its default is one per core, spinning while idle).
INTRA_OP_THREADS = 1


class SemanticUnavailable(SaihmError):
    """The semantic stage cannot be loaded (extra missing, or no model in the directory)."""

    code = "semantic_unavailable"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors; similar meaning, nearby vectors.

    ``embed`` is called with the plaintext of cells as they enter the in-memory cache and with
    each query; it must be deterministic and must not write anything to disk or the network.
    """

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One unit vector per text, in order."""
        ...


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The dot product of two unit vectors (their cosine similarity)."""
    return math.fsum(float(x) * float(y) for x, y in zip(a, b, strict=True))


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    """The cosine of ``query`` to each of ``vectors`` (all unit vectors), in order: one matrix
    product when numpy is there (the semantic extra brings it), else :func:`cosine` each."""
    if not vectors:
        return []
    try:
        import numpy
    except ImportError:
        return [cosine(query, v) for v in vectors]
    matrix = numpy.asarray(vectors, dtype=numpy.float32)
    result: list[float] = row_products(matrix, numpy.asarray(query, dtype=numpy.float32)).tolist()
    return result


def row_products(matrix: Any, vector: Any) -> Any:
    """The dot product of each row of a float32 ``matrix`` with ``vector`` (``matrix @
    vector``), computed on the calling thread (numpy >= 2: ``vecdot``; older: ``einsum``).

    Not ``matrix @ vector``: numpy hands that to its BLAS (OpenBLAS in numpy's wheels), which
    splits a product of a few thousand rows over a pool of threads that are woken for each
    call and spin after it. Measured in process on a shared 2-core machine over a holder of
    10,000 cells: about 6 ms wall per product instead of under 1, and the recall's process
    CPU twice its request thread's (docs/retrieval.md "The engine"); the pool's CPU is taken
    from the other requests. One core for one short product, as for the model
    (:data:`INTRA_OP_THREADS`).
    """
    import numpy

    vecdot = getattr(numpy, "vecdot", None)
    if vecdot is not None:
        return vecdot(matrix, vector)
    return numpy.einsum("ij,j->i", matrix, vector)  # pragma: no cover - numpy < 2


class VectorTable:
    """The unit vectors of a fixed set of keys, stacked once (a numpy matrix when numpy is
    there) so that each query costs one matrix product, not a copy of every vector."""

    def __init__(self, items: Sequence[tuple[Hashable, Sequence[float]]]) -> None:
        self.keys = [k for k, _v in items]
        self.row = {k: i for i, k in enumerate(self.keys)}
        vectors = [v for _k, v in items]
        try:
            import numpy
        except ImportError:
            self._np: Any = None
            self.matrix: Any = vectors
        else:
            self._np = numpy
            # An empty table (a holder with no cells yet) is a 0 x 0 matrix.
            self.matrix = numpy.asarray(vectors or numpy.zeros((0, 0)), dtype=numpy.float32)

    def nearest(
        self, query: Sequence[float], floor: float, k: int, also: Iterable[Hashable]
    ) -> dict[Hashable, float]:
        """{key: cosine} of the ``k`` keys nearest ``query`` at or above ``floor`` (and of every
        key tied with the k-th, so the caller's tie-break decides), and of each key of ``also``
        that is in the table."""
        np = self._np
        if np is None:
            sims = cosines(query, self.matrix)
            above = sorted((i for i, c in enumerate(sims) if c >= floor), key=lambda i: -sims[i])
            top = [i for i in above if k and sims[i] >= sims[above[min(k, len(above)) - 1]]]
        else:
            q = np.asarray(query, dtype=np.float32)
            sims = row_products(self.matrix, q) if self.keys else np.zeros(0)
            above = np.flatnonzero(sims >= floor)
            if len(above) > k:
                kth = -np.partition(-sims[above], k - 1)[k - 1] if k else np.inf
                above = above[sims[above] >= kth]
            top = above.tolist()
        out = {self.keys[i]: float(sims[i]) for i in top}
        for key in also:
            row = self.row.get(key)
            if row is not None:
                out[key] = float(sims[row])
        return out


def model_files(model_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """The tokenizer and ONNX files of a model folder; raises :class:`SemanticUnavailable`
    naming what is missing."""
    path = Path(model_dir)
    if not path.is_dir():
        raise SemanticUnavailable("the embedding model directory does not exist")
    tokenizer = path / "tokenizer.json"
    if not tokenizer.is_file():
        raise SemanticUnavailable("the embedding model directory has no tokenizer.json")
    for onnx in (path / "onnx" / "model.onnx", path / "model.onnx"):
        if onnx.is_file():
            return tokenizer, onnx
    raise SemanticUnavailable("the embedding model directory has no onnx/model.onnx or model.onnx")


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SemanticUnavailable(f"the embedding model's {path.name} is not JSON") from err
    if not isinstance(value, dict):
        raise SemanticUnavailable(f"the embedding model's {path.name} is not a JSON object")
    return value


def _pooling(path: Path) -> str:
    config = _json(path / "1_Pooling" / "config.json")
    if not config:
        return "mean"
    modes = [
        mode
        for mode in ("mean", "cls", "max")
        if config.get(f"pooling_mode_{mode}_token" + ("s" if mode != "cls" else ""))
    ]
    others = [k for k, v in config.items() if k.startswith("pooling_mode_") and v]
    if len(modes) != 1 or len(others) != 1:
        raise SemanticUnavailable("the embedding model's pooling is not one of mean, cls, max")
    return modes[0]


class OnnxEmbedder:
    """A sentence-embedding model folder run by onnxruntime on the CPU (module docstring)."""

    def __init__(self, model_dir: str | os.PathLike[str]) -> None:
        tokenizer_file, onnx_file = model_files(model_dir)
        path = Path(model_dir)
        try:
            import numpy
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as err:
            raise SemanticUnavailable(INSTALL_HINT) from err
        self._np = numpy
        self.pooling = _pooling(path)
        max_tokens = _json(path / "sentence_bert_config.json").get(
            "max_seq_length", DEFAULT_MAX_TOKENS
        )
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise SemanticUnavailable("the embedding model's max_seq_length is not a count")
        try:
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            tokenizer.enable_truncation(max_length=max_tokens)
            tokenizer.enable_padding()
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            # One thread that sleeps when idle (docs/retrieval.md "The engine"): a query is one
            # short text, which onnxruntime's default pool (a spinning thread per core) encodes
            # no faster but at twice the CPU, taken from the other requests; a batch of new
            # cells, off the request path, took as long either way under load.
            options.intra_op_num_threads = INTRA_OP_THREADS
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
            session = onnxruntime.InferenceSession(
                str(onnx_file), options, providers=["CPUExecutionProvider"]
            )
        except Exception as err:  # both libraries raise their own types for unreadable files
            raise SemanticUnavailable("the embedding model's files could not be loaded") from err
        self._tokenizer = tokenizer
        self._session = session
        self._inputs = {i.name for i in session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self._inputs:
            raise SemanticUnavailable("the embedding model does not take input_ids")

    def embed(self, texts: Sequence[str]) -> list[Any]:
        """One L2-normalised float32 vector (a numpy row) per text, in order."""
        np = self._np
        # Texts of like length share a model call, as sentence-transformers' encode does: a
        # call is padded to its longest text, and the padding costs as much as text. The
        # vectors do not change (the attention mask hides the padding); the order is put back.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[Any] = [None] * len(texts)
        for start in range(0, len(order), BATCH):
            part = order[start : start + BATCH]
            encodings = self._tokenizer.encode_batch([texts[i] for i in part])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
            tokens = self._session.run(None, feed)[0].astype(np.float32)
            if tokens.ndim == 2:  # the model pools itself
                pooled = tokens
            elif self.pooling == "cls":
                pooled = tokens[:, 0]
            elif self.pooling == "max":
                pooled = np.where(mask[:, :, None] > 0, tokens, -1e9).max(axis=1)
            else:
                weights = mask[:, :, None].astype(np.float32)
                pooled = (tokens * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            for i, vector in zip(part, pooled / np.clip(norms, 1e-12, None), strict=True):
                out[i] = vector
        return out


def check_semantic(model_dir: str | os.PathLike[str]) -> None:
    """Raise :class:`SemanticUnavailable` now, before serving, if :func:`load_embedder` would
    fail for want of the extra or of the model's files (the model itself loads in each worker)."""
    import importlib.util
    import sys

    for module in ("onnxruntime", "tokenizers", "numpy"):
        # A module set to None in sys.modules cannot be imported (find_spec would raise).
        if sys.modules.get(module, ...) is None or (
            module not in sys.modules and importlib.util.find_spec(module) is None
        ):
            raise SemanticUnavailable(INSTALL_HINT)
    model_files(model_dir)


def load_embedder(model_dir: str | os.PathLike[str]) -> Embedder:
    """The sentence-embedding model saved in ``model_dir``, loaded offline on the CPU.

    Raises :class:`SemanticUnavailable` with :data:`INSTALL_HINT` when the semantic extra is
    not installed, or a one-line reason when ``model_dir`` lacks a file or cannot be read.
    """
    return OnnxEmbedder(model_dir)
