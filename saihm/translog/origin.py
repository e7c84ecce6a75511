"""The log's identity: its checkpoint origin, fixed when the data directory is created.

c2sp.org/tlog-checkpoint calls the origin "a unique identifier for the log identity which
issued the checkpoint", and c2sp.org/tlog-witness keys a witness's state by it, so two
deployments must never share one and a log must never change its own. The origin is recorded
in ``<data>/origin`` (one line, written once, fsync'd) and is the key name of both checkpoint
keys. Rules (docs/formats.md §2):

- ``saihm serve --origin ORIGIN`` on a new data directory records ORIGIN; without ``--origin``
  the default is ``saihm.localhost/log/<first 8 hex of SHA-256 of the log's Ed25519 public
  key>``, unique per deployment because the key is;
- a later start naming another origin is refused (:class:`~saihm.errors.Conflict`);
- a data directory made before the origin was recorded (no ``origin`` file, already
  initialised) keeps the name its checkpoint keys carry, the first round's fixed origin
  ``saihm.localhost/log``, and records it on first open; so does a copy restored without its
  ``origin`` file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saihm.errors import Conflict, MalformedInput
from saihm.translog import LogKeys, NoteError
from saihm.translog.note import check_key_name

__all__ = [
    "DEFAULT_PREFIX",
    "LEGACY_ORIGIN",
    "ORIGIN_FILE",
    "check_origin",
    "default_origin",
    "generate_log_keys",
    "record_origin",
    "recorded_origin",
    "settle_origin",
]

ORIGIN_FILE = "origin"
#: The origin every data directory of the first round was created with.
LEGACY_ORIGIN = "saihm.localhost/log"
DEFAULT_PREFIX = "saihm.localhost/log/"


def check_origin(origin: str) -> str:
    """Return ``origin`` if it can be a checkpoint origin and key name: one line of printable
    characters without spaces or ``+``, 1..255 bytes (the ``subtree/v1`` length prefix).

    Raises :class:`MalformedInput` otherwise.
    """
    try:
        check_key_name(origin)
    except NoteError as err:
        raise MalformedInput(f"bad origin {origin!r}: {err}") from err
    if not 0 < len(origin.encode()) < 256 or not origin.isprintable():
        raise MalformedInput("the origin must be 1..255 bytes of printable characters")
    return origin


def default_origin(ed25519_public_key: bytes) -> str:
    """``saihm.localhost/log/<8 hex>``: the first 4 bytes of SHA-256 of the log's Ed25519
    checkpoint key, so every deployment that did not choose an origin still has its own."""
    return DEFAULT_PREFIX + hashlib.sha256(ed25519_public_key).hexdigest()[:8]


def generate_log_keys(origin: str | None) -> LogKeys:
    """Fresh checkpoint keys named ``origin``, or the default origin derived from them."""
    ed25519 = Ed25519PrivateKey.generate()
    name = origin or default_origin(ed25519.public_key().public_bytes_raw())
    return LogKeys(check_origin(name), ed25519, os.urandom(32))


def _initialised(data_dir: Path) -> bool:
    """A data directory the first round created: it has a pinned authority key or a store."""
    return (data_dir / "authority.pub").exists() or (data_dir / "lmdb" / "data.mdb").exists()


def _keys_name(data_dir: Path) -> str:
    """The key name in the data directory's public ``checkpoint-verifier-keys.txt`` (written
    by every store since the first round), else :data:`LEGACY_ORIGIN`."""
    try:
        first = (data_dir / "checkpoint-verifier-keys.txt").read_text().split()[0]
    except (OSError, IndexError, UnicodeDecodeError):
        return LEGACY_ORIGIN
    return check_origin(first.split("+", 1)[0])


def recorded_origin(data_dir: str | Path) -> str | None:
    """The origin recorded in ``data_dir``; for an initialised directory without an ``origin``
    file (made before origins were recorded, or restored from a copy that left it out) the
    name its checkpoint keys carry, which is :data:`LEGACY_ORIGIN` for every first-round
    directory; None for a directory not created yet.

    Raises :class:`MalformedInput` if the ``origin`` file is not one valid origin line.
    """
    path = Path(data_dir) / ORIGIN_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _keys_name(Path(data_dir)) if _initialised(Path(data_dir)) else None
    except UnicodeDecodeError as err:
        raise MalformedInput(f"{path} is not UTF-8") from err
    if not text.endswith("\n") or text.count("\n") != 1:
        raise MalformedInput(f"{path} must hold exactly one line")
    return check_origin(text[:-1])


def record_origin(data_dir: str | Path, origin: str) -> str:
    """Record ``origin`` in ``data_dir`` unless one is recorded already; return the recorded.

    The file appears whole or not at all (written beside, fsync'd, then hard-linked into place,
    which fails if another process got there first). Raises :class:`Conflict` if a different
    origin is recorded.
    """
    directory = Path(data_dir)
    final = directory / ORIGIN_FILE
    tmp = directory / f".origin.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(check_origin(origin) + "\n")
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, final)
    except FileExistsError:
        pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    recorded = recorded_origin(directory)
    if recorded != origin:
        raise Conflict(f"the data directory records origin {recorded}, not {origin}")
    return origin


def settle_origin(data_dir: str | Path, requested: str | None, keys_origin: str) -> str:
    """The origin of an existing log whose checkpoint keys are named ``keys_origin``.

    Records it if the directory has none recorded (a first-round directory adopts
    :data:`LEGACY_ORIGIN`). Raises :class:`Conflict` if ``requested`` (``--origin``) or the
    key name differs from the recorded origin: a log's origin cannot change.
    """
    recorded = recorded_origin(data_dir) or keys_origin
    if requested is not None and requested != recorded:
        raise Conflict(
            f"this data directory's log is {recorded}; --origin {requested} names another "
            "(a log's origin cannot change)"
        )
    if keys_origin != recorded:
        raise Conflict(f"the checkpoint keys are named {keys_origin}, the log is {recorded}")
    if not (Path(data_dir) / ORIGIN_FILE).exists():
        record_origin(data_dir, recorded)
    return recorded
