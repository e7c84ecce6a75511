"""The vault metadata file ``<data>/provider/local-vault.json`` (no secrets in it).

``{"providerId", "version", "holderId", "sessionId", "consumers": {name: {"grantId",
"namespaces", "mode", "sections", "expiresAt"}}}``. ``sessionId`` names the session the
person's own stores are sealed into; a token is needed to use it, and tokens are never
written here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from saihm.errors import MalformedInput, NotFound
from saihm.provider.models import PROVIDER_ID, PROVIDER_VERSION

FILE = Path("provider") / "local-vault.json"


@dataclass
class VaultMeta:
    """The parsed metadata file."""

    holder_id: bytes
    session_id: bytes
    consumers: dict[str, dict[str, Any]] = field(default_factory=dict)
    provider_id: str = PROVIDER_ID
    version: str = PROVIDER_VERSION

    @staticmethod
    def path(data_dir: Path) -> Path:
        """Where the file lives for a data directory."""
        return data_dir / FILE

    @classmethod
    def load(cls, data_dir: Path) -> VaultMeta:
        """Read the file; ``NotFound`` if ``saihm memory init`` has not run."""
        path = cls.path(data_dir)
        try:
            raw = json.loads(path.read_text("utf-8"))
            return cls(
                holder_id=bytes.fromhex(raw["holderId"]),
                session_id=bytes.fromhex(raw["sessionId"]),
                consumers=dict(raw.get("consumers", {})),
                provider_id=raw.get("providerId", PROVIDER_ID),
                version=raw.get("version", PROVIDER_VERSION),
            )
        except FileNotFoundError as err:
            raise NotFound("no vault here; run 'saihm memory init'", code="no_vault") from err
        except (ValueError, KeyError, TypeError) as err:
            raise MalformedInput("the vault metadata file is damaged") from err

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object."""
        return {
            "providerId": self.provider_id,
            "version": self.version,
            "holderId": self.holder_id.hex(),
            "sessionId": self.session_id.hex(),
            "consumers": self.consumers,
        }

    def save(self, data_dir: Path) -> None:
        """Write the file atomically (temporary file, then rename)."""
        path = self.path(data_dir)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n", "utf-8")
        os.replace(tmp, path)
