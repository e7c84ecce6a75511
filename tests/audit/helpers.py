"""Shared test helpers: run the verifier CLI, read and rewrite the raw log as an attacker would."""

from __future__ import annotations

import json
import struct
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import cbor2
import lmdb
from aiohttp.test_utils import TestServer

from saihm.audit.run import verify
from saihm.commands.audit import parse_verify
from saihm.http.app import create_app
from saihm.operator import Operator
from saihm.storage.lmdb import LmdbStorage
from saihm.translog import Checkpoint, LogKeys, TreeStorage

if TYPE_CHECKING:
    from .conftest import World

_U64 = struct.Struct(">Q")


@asynccontextmanager
async def serving(world: World) -> AsyncIterator[tuple[Operator, str]]:
    """The world's operator behind the real HTTP app on a loopback port: ``(operator, base
    URL without the trailing slash)``; the server and the store are closed afterwards."""
    op = world.operator()
    server = TestServer(create_app(op), host="127.0.0.1")
    await server.start_server()
    try:
        yield op, str(server.make_url("")).rstrip("/")
    finally:
        await server.close()
        op.store.close()


def run_verify(capsys, *argv: str) -> tuple[int, dict]:
    """Run the public checks of ``saihm verify --json ...`` (without the private-state check
    ``--data`` adds, saihm/offline/fsck.py); return (exit code, report)."""
    capsys.readouterr()
    code = verify(parse_verify([*argv, "--json", "--no-progress"]))
    out = capsys.readouterr().out
    return code, json.loads(out)


def first_failure(report: dict) -> dict:
    return report["failures"][0]


def leaves(lmdb_dir: Path) -> list[bytes]:
    env = lmdb.open(str(lmdb_dir), readonly=True, lock=False, max_dbs=64)
    try:
        db = env.open_db(b"leaves", create=False)
        with env.begin() as txn:
            return [bytes(v) for _, v in txn.cursor(db=db).iternext()]
    finally:
        env.close()


def find_leaf(lmdb_dir: Path, operation: str, subject: bytes | None = None) -> int:
    """Index of the first leaf with ``operation`` (and ``subject``)."""
    for index, leaf in enumerate(leaves(lmdb_dir)):
        m = cbor2.loads(leaf)
        if m[3] == operation and (subject is None or m[2] == subject):
            return index
    raise LookupError(operation)


def rewrite_log(env: lmdb.Environment, data_dir: Path, new_leaves: list[bytes]) -> None:
    """The full-access attacker: replace the leaves, recompute every tile and node, and re-sign
    checkpoints for the new sizes with the log keys found in the data directory."""
    keys = LogKeys.load(data_dir / "log-keys")
    cps = env.open_db(b"checkpoints")
    with tempfile.TemporaryDirectory() as tmp:
        # The tree is recomputed in a scratch storage (LMDB allows one handle per file in a
        # process), then its raw records are written over the log's.
        scratch = LmdbStorage(Path(tmp), TreeStorage.DB_NAMES, map_size=1 << 30)
        try:
            tree = TreeStorage(scratch)
            with scratch.write() as stxn:
                tree.append(stxn, new_leaves)
            with scratch.read() as stxn, env.begin(write=True) as txn:
                old_sizes = [_U64.unpack(k)[0] for k, _ in txn.cursor(db=cps).iternext()]
                for name in TreeStorage.DB_NAMES:
                    db = env.open_db(name, txn=txn)
                    txn.drop(db, delete=False)
                    for key, value in stxn.scan(scratch.namespace(name)):
                        txn.put(key, value, db=db)
                txn.drop(cps, delete=False)
                for size in sorted({min(s, len(new_leaves)) for s in old_sizes}):
                    note = keys.sign(Checkpoint(keys.origin, size, tree.root(stxn, size)))
                    txn.put(_U64.pack(size), note, db=cps)
        finally:
            scratch.close()
