"""A real data directory, built once with the operator and copied per test.

Tests may import the store and operator (only saihm/audit may not). Layout of the template
(``<root>/data``, ``<root>/kek``, ``<root>/authority``):

- holders A and B, each with a KEY receipt; A remembers alpha, beta, gamma, delta in session S1
  and epsilon in session S2; B remembers one cell;
- A forgets gamma (its wrapped DEK is saved first: "an old backup"), then the KEK is rotated,
  which retires the generation that wrapped it;
- A proposes, A and B vote;
- a checkpoint is signed after each phase, so there are several checkpoints.
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import lmdb
import pytest

from saihm.compose import initialise, open_operator
from saihm.config import Config
from saihm.events import CapabilityScope
from saihm.protocol import call as binding_call
from tests.support.postgres import copy_test_store


@dataclass
class World:
    """A copy of the template: paths, tokens and the ids the tests act on."""

    root: Path
    config: Config
    token_a1: str
    token_a2: str
    token_b: str
    cells: dict[str, bytes]
    old_dek_gamma: bytes
    proposal_id: bytes

    @property
    def data(self) -> Path:
        return self.config.data_dir

    @property
    def lmdb_dir(self) -> Path:
        return self.config.lmdb_dir

    @property
    def keys_file(self) -> Path:
        """The public verifier keys the data directory publishes (Config.verifier_keys_file)."""
        return self.config.verifier_keys_file

    def operator(self):
        """A fresh operator over this copy (close with ``op.store.close()``)."""
        return open_operator(self.config, checkpointer=False)

    def recall(self, token: str, query: str | None = None) -> list[dict]:
        op = self.operator()
        try:
            params = {} if query is None else {"query": query}
            return binding_call(op, token, "saihm_recall", params)
        finally:
            op.store.close()

    def env(self) -> lmdb.Environment:
        """Raw write access to the LMDB environment: the attacker's view."""
        return lmdb.open(str(self.lmdb_dir), max_dbs=64, map_size=1 << 30)


def u64(n: int) -> bytes:
    return struct.pack(">Q", n)


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("audit-template")
    config = Config.for_data(root / "data")
    authority = initialise(config)
    op = open_operator(config, checkpointer=False)
    s1, s2, sb = os.urandom(32), os.urandom(32), os.urandom(32)
    a = op.admin.create_holder()
    b = op.admin.create_holder()
    tok = {
        "a1": authority.issue(a, s1, CapabilityScope(), 86_400).to_token(),
        "a2": authority.issue(a, s2, CapabilityScope(), 86_400).to_token(),
        "b": authority.issue(b, sb, CapabilityScope(), 86_400).to_token(),
    }
    cells: dict[str, bytes] = {}
    for name in ("alpha", "beta", "gamma", "delta"):
        cells[name] = bytes.fromhex(
            binding_call(op, tok["a1"], "saihm_remember", {"content": f"{name} memory"})["cellId"]
        )
    op.store.checkpoint_now()
    cells["epsilon"] = bytes.fromhex(
        binding_call(op, tok["a2"], "saihm_remember", {"content": "epsilon memory"})["cellId"]
    )
    cells["bravo"] = bytes.fromhex(
        binding_call(op, tok["b"], "saihm_remember", {"content": "bravo memory"})["cellId"]
    )
    op.store.checkpoint_now()
    with op.store.storage.read() as txn:
        old_dek = bytes(txn.get(cells["gamma"], db=op.store.storage.namespace(b"deks")))
    binding_call(op, tok["a1"], "saihm_forget", {"id": cells["gamma"].hex()})
    op.store.rotate_kek()
    proposal = binding_call(
        op,
        tok["a1"],
        "saihm_governance_propose",
        {"scope": "emission_param", "paramKey": "kek_rotation_hours", "proposedValue": "12"},
    )["proposalId"]
    binding_call(op, tok["a1"], "saihm_governance_vote", {"proposalId": proposal, "approve": True})
    binding_call(op, tok["b"], "saihm_governance_vote", {"proposalId": proposal, "approve": False})
    op.store.close()
    return {
        "root": root,
        "tokens": tok,
        "cells": cells,
        "old_dek": old_dek,
        "proposal": bytes.fromhex(proposal),
    }


@pytest.fixture
def world(template: dict, tmp_path: Path) -> World:
    root = tmp_path / "w"
    shutil.copytree(template["root"], root)
    copy_test_store(template["root"] / "data", root / "data")  # SAIHM_TEST_STORE=postgresql
    tok = template["tokens"]
    return World(
        root=root,
        config=Config.for_data(root / "data"),
        token_a1=tok["a1"],
        token_a2=tok["a2"],
        token_b=tok["b"],
        cells=dict(template["cells"]),
        old_dek_gamma=template["old_dek"],
        proposal_id=template["proposal"],
    )


GROWN = 600  # receipts added to the template's 12: two full bundles and a partial one


@pytest.fixture(scope="session")
def grown(template: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("grown") / "w"
    shutil.copytree(template["root"], root)
    copy_test_store(template["root"] / "data", root / "data")
    op = World(root, Config.for_data(root / "data"), *[None] * 6).operator()
    try:
        for i in range(GROWN):
            binding_call(op, template["tokens"]["a1"], "saihm_remember", {"content": f"note {i}"})
        op.store.checkpoint_now()
    finally:
        op.store.close()
    return root


@pytest.fixture
def big(grown: Path, template: dict, tmp_path: Path) -> World:
    root = tmp_path / "big"
    shutil.copytree(grown, root)
    copy_test_store(grown / "data", root / "data")
    tok = template["tokens"]
    return World(
        root,
        Config.for_data(root / "data"),
        tok["a1"],
        tok["a2"],
        tok["b"],
        dict(template["cells"]),
        template["old_dek"],
        template["proposal"],
    )
