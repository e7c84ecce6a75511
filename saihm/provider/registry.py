"""``providers.json``: registering ``local-vault`` where RFC 0007 proposes providers register.

RFC 0007 "Provider interface (draft)": "Implementations register in
~/.ai-passport/memory/providers.json (proposed)." The RFC fixes the path, not the shape; ours is

``{"providers": [{"id", "version", "dataDir", "endpoint"?, "mcp": {"command", "args"}}]}``

one entry per provider id *and* data directory. Registering again replaces that entry and keeps
every other one (another provider's or another data directory's). The file holds no token and
no key: a consumer gets its token from the person (``saihm memory grant``). A file that is not
this shape is refused, never overwritten, so a hand-edited registry is not lost; the new file
is written to a temporary file and renamed over the old one.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from saihm.errors import MalformedInput
from saihm.provider.models import PROVIDER_ID, PROVIDER_VERSION

DEFAULT_PATH = Path("~/.ai-passport/memory/providers.json")


def default_path() -> Path:
    """``~/.ai-passport/memory/providers.json`` for the current user."""
    return DEFAULT_PATH.expanduser()


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"providers": []}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeError, OSError) as err:
        raise MalformedInput(f"{path} is not a JSON registry; left unchanged") from err
    providers = raw.get("providers") if isinstance(raw, dict) else None
    if not isinstance(providers, list) or not all(isinstance(p, dict) for p in providers):
        raise MalformedInput(f'{path} has no "providers" list; left unchanged')
    return raw


def entry(data_dir: Path, endpoint: str | None) -> dict[str, Any]:
    """The registry entry of this install's ``local-vault`` for ``data_dir``.

    ``mcp.command`` is the absolute path of the ``saihm`` beside this interpreter, so a host
    whose PATH lacks the venv can still start ``saihm memory mcp``.
    """
    command = str(Path(sys.executable).parent / "saihm")
    item: dict[str, Any] = {
        "id": PROVIDER_ID,
        "version": PROVIDER_VERSION,
        "dataDir": str(data_dir.resolve()),
        "mcp": {"command": command, "args": ["memory", "mcp"]},
    }
    if endpoint:
        item["endpoint"] = endpoint
    return item


def register(path: Path, data_dir: Path, endpoint: str | None = None) -> dict[str, Any]:
    """Add or replace this provider's entry in the registry at ``path``; returns the entry.

    Raises ``MalformedInput`` when the existing file is not a registry (it is left unchanged).
    """
    registry = _load(path)
    item = entry(data_dir, endpoint)
    kept = [
        p
        for p in registry["providers"]
        if not (p.get("id") == item["id"] and p.get("dataDir") == item["dataDir"])
    ]
    registry["providers"] = [*kept, item]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".providers.", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(registry, out, indent=2)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return item
