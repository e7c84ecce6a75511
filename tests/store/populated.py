"""A populated store for tampering tests: two holders and a third, sessions, grants (one
withdrawn), a revoked session, a shared accepted contract, an unaccepted one, forgotten cells and
pending proposals. Recall and status receipts are off, so reading changes nothing and a baseline
taken once holds for every later read of an untampered store.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path

import lmdb

from saihm.errors import SaihmError
from saihm.events import CapabilityScope, SealedPayload
from saihm.events.envelope import seal
from saihm.operator import Operator
from saihm.protocol import call as binding_call
from saihm.store import Store

from .conftest import World, make_world


@dataclass
class Populated:
    world: World
    tokens: dict[str, str] = field(default_factory=dict)
    cells: dict[str, bytes] = field(default_factory=dict)
    contracts: dict[str, bytes] = field(default_factory=dict)
    grants: dict[str, bytes] = field(default_factory=dict)
    holders: dict[str, bytes] = field(default_factory=dict)

    def recall(self, name: str) -> frozenset[str] | None:
        """The plaintexts a token's recall returns, or None when the token is refused."""
        try:
            items = binding_call(self.world.operator, self.tokens[name], "saihm_recall", {})
        except SaihmError:
            return None
        return frozenset(item["plaintext"] for item in items)

    def views(self) -> dict[str, frozenset[str] | None]:
        return {name: self.recall(name) for name in self.tokens}

    def views_reopened(self) -> dict[str, frozenset[str] | None]:
        """Every token's recall through a freshly opened store (None: refused), as a tampered
        store would be read after a restart; nothing is written."""
        try:
            store = Store(self.world.config, clock=self.world.clock)
        except SaihmError:
            return dict.fromkeys(self.tokens)  # refused at open: every token reads nothing
        self.world.operator = Operator(store, self.world.config)
        try:
            return self.views()
        finally:
            store.storage.close()  # no closing checkpoint: nothing may be written between cases


def _token(world: World, holder_id: bytes, scope: CapabilityScope | None = None) -> str:
    cap = world.authority.issue(
        holder_id,
        secrets.token_bytes(32),
        scope or CapabilityScope(),
        3600,
        now=int(world.clock()),
    )
    return cap.to_token()


def populate(root: Path) -> Populated:
    world = make_world(root, recall_receipts=False, status_receipts=False)
    p = Populated(world)
    alice, bob, carol = world.holder(), world.holder(), world.holder()
    p.holders.update(alice=alice.holder_id, bob=bob.holder_id, carol=carol.holder_id)
    p.tokens.update(a1=alice.token, bob=bob.token, carol=carol.token)
    a2_session, p.tokens["a2"] = world.session(alice.holder_id)

    def remember(token: str, text: str, **extra: object) -> bytes:
        cell = binding_call(world.operator, token, "saihm_remember", {"content": text, **extra})
        return bytes.fromhex(cell["cellId"])

    p.cells["a1"] = remember(alice.token, "alice one secret")
    p.cells["a1_shared"] = remember(alice.token, "alice shared secret")
    p.cells["a1_work"] = remember(alice.token, "alice work secret", namespace="work")
    p.cells["a2"] = remember(p.tokens["a2"], "alice session two secret")
    p.cells["a1_gone"] = remember(alice.token, "alice forgotten secret")
    p.cells["bob"] = remember(bob.token, "bob secret")
    p.cells["bob_gone"] = remember(bob.token, "bob forgotten secret")
    p.cells["carol"] = remember(carol.token, "carol secret")
    binding_call(
        world.operator, alice.token, "saihm_record", {"content": "alice said", "kind": "said"}
    )
    binding_call(world.operator, alice.token, "saihm_forget", {"id": p.cells["a1_gone"].hex()})
    binding_call(world.operator, bob.token, "saihm_forget", {"id": p.cells["bob_gone"].hex()})

    share = {"type": "permanent", "scope": "read"}
    k1 = binding_call(
        world.operator,
        alice.token,
        "saihm_share",
        {"granteeIdHashesHex": [bob.hex], "shardIds": [p.cells["a1_shared"].hex()], **share},
    )["contractId"]
    binding_call(world.operator, bob.token, "saihm_accept_contract", {"contractId": k1})
    k2 = binding_call(
        world.operator,
        alice.token,
        "saihm_share",
        {"granteeIdHashesHex": [carol.hex], "shardIds": [p.cells["a1"].hex()], **share},
    )["contractId"]
    k3 = binding_call(
        world.operator,
        p.tokens["a2"],
        "saihm_share",
        {"granteeIdHashesHex": [carol.hex], "shardIds": [p.cells["a2"].hex()], **share},
    )["contractId"]
    binding_call(world.operator, carol.token, "saihm_accept_contract", {"contractId": k3})
    binding_call(world.operator, p.tokens["a2"], "saihm_revoke_share", {"contractId": k3})
    p.contracts.update(
        accepted=bytes.fromhex(k1), offered=bytes.fromhex(k2), revoked=bytes.fromhex(k3)
    )

    p.tokens["a_all"] = world.grant_token(alice.holder_id)
    p.tokens["a_memory"] = world.grant_token(alice.holder_id, ["memory"])
    p.tokens["a_withdrawn"] = world.grant_token(alice.holder_id)
    withdrawn = _grant_id(p.tokens["a_withdrawn"])
    world.operator.admin.ungrant(withdrawn)
    p.grants.update(withdrawn=withdrawn, all=_grant_id(p.tokens["a_all"]))

    revoked_session, p.tokens["a_revoked"] = world.session(alice.holder_id)
    world.operator.admin.revoke_session(alice.holder_id, revoked_session)

    # Two pending provider proposals under a consumer grant of alice's (RFC 0007).
    consumer_grant, _ = world.operator.admin.grant(
        alice.holder_id, ["memory"], int(world.clock()) + 600
    )
    p.grants["consumer"] = consumer_grant
    for n in range(2):
        payload = SealedPayload(
            content=f"alice proposed {n}", session_id=a2_session, namespace="memory", kind="memory"
        )
        cell, dek = seal(
            payload,
            key=world.store.holder_key(alice.holder_id),
            kek_version=world.store.kek_dir.current_version,
            tier="STANDARD",
            timestamp=int(world.clock()),
        )
        meta = {"consumer": "agent", "grantId": consumer_grant.hex(), "proposedAt": 0}
        world.store.held.put(secrets.token_bytes(32), cell, dek, json.dumps(meta).encode())
    world.store.checkpoint_now()
    return p


def _grant_id(token: str) -> bytes:
    from saihm.events import Capability

    grant_id = Capability.from_token(token).scope.grant_id
    assert grant_id is not None
    return grant_id


def raw_env(world: World) -> lmdb.Environment:
    """The store's own environment: in one process LMDB allows one handle per file, and an
    attacker's raw write is the same bytes whichever handle makes it."""
    return world.store.storage.env


def named_databases(env: lmdb.Environment) -> list[bytes]:
    """Every named database of the environment (the main database lists them)."""
    with env.begin() as txn:
        return sorted(bytes(k) for k in txn.cursor().iternext(values=False))


def clone(template: Populated, template_root: Path, root: Path) -> Populated:
    """A copy of a closed populated store (data, KEK and authority directories) under ``root``,
    opened afresh: the same holders, tokens and cells, at the cost of a file copy."""
    import shutil

    from tests.support.postgres import copy_test_store

    shutil.copytree(template_root, root, dirs_exist_ok=True)
    copy_test_store(template_root / "data", root / "data")  # SAIHM_TEST_STORE=postgresql
    return reopened(template, root)


def reopened(template: Populated, root: Path) -> Populated:
    """``template``'s holders, tokens and cells over a fresh store of the directories under
    ``root`` (the template's own root to reopen it)."""
    from saihm.authority import Authority
    from saihm.config import Config
    from saihm.operator import Operator
    from saihm.store import Store

    config = Config.for_data(root / "data", recall_receipts=False, status_receipts=False)
    clock = template.world.clock
    store = Store(config, clock=clock)
    world = World(config, Authority.open(config.authority_dir), Operator(store, config), clock)
    copy = Populated(
        world,
        dict(template.tokens),
        dict(template.cells),
        dict(template.contracts),
        dict(template.grants),
        dict(template.holders),
    )
    copy.baseline = template.baseline  # type: ignore[attr-defined]
    return copy
