"""A model-checked run of random operation sequences against a real operator and store.

Three holders with two sessions each, plus grant tokens a person makes, call every tool and
extension method in random order, with reopens, KEK rotations and clock jumps in between. A
small model says who may see what; after every step the store must agree with it exactly and
its log must stay verifiable:

- rebuild equals live ("Projections ... rebuilt from the log ..., byte-identical to the live
  ones", DESIGN.md);
- "An operator MUST consult the erasure list on every saihm_recall and MUST NOT return an
  erased cell to anyone" (saihm-protocol "Erasure");
- "The store filters every recall item by item against who is asking, so a recall returns
  nothing that the person was never allowed to see" (requirements.txt): a session token sees
  its own session's cells and the covered cells of contracts active for its holder; a grant
  token sees its holder's cells in its namespaces (and shared cells in them);
- "On saihm_recall by a grantee, the operator MUST include the covered cells of every active
  contract that names the grantee" (saihm-protocol "Sharing contracts") — the expected set is
  compared for equality, not only containment;
- every receipt verifies under its holder's KEY receipt with a second ML-DSA implementation
  (pqcrypto) and is included under the latest signed checkpoint.

The machine runs with the cache of verified cells on (docs/retrieval.md "The cache"), and
again as :class:`TwoProcessMachine`: a second process (tests/store/_sm_child.py) with its own
store and cache shares the data directory, the calls alternate between the two processes, and
after every step each process must see exactly what the model says, so one process's FORGET,
REVOKE, UNGRANT, decline or KEK rotation is seen by the other's cache before its next read.

``SAIHM_LONG=1`` runs many more examples.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import secrets
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from pqcrypto.sign.ml_dsa_65 import verify as pq_verify

from saihm import errors
from saihm.errors import SaihmError, Unauthenticated
from saihm.events import Capability, CapabilityScope, Operation, Receipt
from saihm.events.signing import RECEIPT_CONTEXT, receipt_signed_bytes
from saihm.retrieval import DEFAULT_WEIGHTS, Embedder, analyse, analyse_query, matches
from saihm.retrieval.context import WINDOW
from saihm.retrieval.embed import cosine
from saihm.translog import leaf_hash, verify_checkpoint, verify_inclusion
from tests.support.world import World, make_world

LONG = os.environ.get("SAIHM_LONG") == "1"
TTL = 3600
NAMESPACES = ("memory", "work")
WORDS = ("apple", "river", "stone")
GRANT_SCOPES: tuple[tuple[str, ...] | None, ...] = (None, ("memory",), ("work", "record"))
CLOCK_STEPS = (1, 1800, 4000, 90_000, 8 * 86_400)
MODES = ("temporary", "permanent", "syndicate")

pick = st.integers(min_value=0, max_value=10_000)


@dataclass
class Tok:
    holder: int
    session_id: bytes
    token: str
    expires_at: int
    grant_id: bytes | None = None
    namespaces: frozenset[str] | None = None


@dataclass
class CellM:
    owner: int
    session_id: bytes
    namespace: str
    content: str
    erased: bool = False
    kind: str = "memory"


@dataclass
class ContractM:
    owner: int
    grantees: set[int]
    shards: list[bytes]
    expires_at: int
    accepted: set[int] = field(default_factory=set)
    revoked: bool = False


@dataclass
class GrantM:
    holder: int
    expires_at: int
    revoked: bool = False


CACHE_MB = 64


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="saihm-sm-"))
        self.world: World = make_world(
            self.root, embedder=self.new_embedder(), recall_cache_mb=CACHE_MB
        )
        self.holders = [self.world.holder() for _ in range(3)]
        self.ids = [h.holder_id for h in self.holders]
        self.tokens: list[Tok] = []
        for i, h in enumerate(self.holders):
            self.tokens.append(Tok(i, h.session_id, h.token, self._now() + TTL))
            sid, token = self.world.session(h.holder_id)
            self.tokens.append(Tok(i, sid, token, self._now() + TTL))
        self.cells: dict[bytes, CellM] = {}
        self.contracts: dict[bytes, ContractM] = {}
        self.grants: dict[bytes, GrantM] = {}
        self.proposals: dict[bytes, dict] = {}  # id -> {opens, votes: {holder: approve}}
        self.record_ended: set[tuple[int, bytes]] = set()
        self.record_seq: dict[tuple[int, bytes], int] = {}
        self.public_keys: dict[bytes, bytes] = {}
        self.verified = 0
        self.rebuilds = 0
        self.counter = 0

    def new_embedder(self) -> Embedder | None:
        """The semantic stage's embedder (none: the lexical ranking alone)."""
        return None

    # -- model helpers --------------------------------------------------------------------

    def _now(self) -> int:
        return int(self.world.clock.now)

    def _valid(self, tok: Tok) -> bool:
        if tok.expires_at <= self._now():
            return False
        if tok.grant_id is not None:
            grant = self.grants[tok.grant_id]
            return not grant.revoked and grant.expires_at > self._now()
        return True

    def _active_for(self, contract: ContractM, holder: int) -> bool:
        return (
            holder in contract.accepted
            and not contract.revoked
            and (contract.expires_at == 0 or contract.expires_at > self._now())
        )

    def _own_in_scope(self, tok: Tok, cell: CellM) -> bool:
        if cell.owner != tok.holder:
            return False
        if tok.namespaces is not None and cell.namespace not in tok.namespaces:
            return False
        return tok.grant_id is not None or cell.session_id == tok.session_id

    def _contract_in_scope(self, tok: Tok, contract: ContractM) -> bool:
        """A token acts only on what it may see: a holder-wide grant with no namespace limit sees
        every contract of its holder; another token one whose every shard it sees (or, for a
        session token, an erased shard written in its session)."""
        if contract.owner != tok.holder:
            return False
        if tok.grant_id is not None and tok.namespaces is None:
            return True
        for shard in contract.shards:
            cell = self.cells[shard]
            if cell.erased:
                if tok.grant_id is not None or cell.session_id != tok.session_id:
                    return False
            elif not self._own_in_scope(tok, cell):
                return False
        return True

    def expected(self, tok: Tok, query: str = "") -> set[bytes]:
        """The model's answer to "what may this token see": own scope plus active contracts."""
        out = {cid for cid, c in self.cells.items() if not c.erased and self._own_in_scope(tok, c)}
        for contract in self.contracts.values():
            if not self._active_for(contract, tok.holder):
                continue
            for cid in contract.shards:
                c = self.cells[cid]
                if c.erased or c.owner == tok.holder:
                    continue
                if tok.namespaces is None or c.namespace in tok.namespaces:
                    out.add(cid)
        # docs/retrieval.md "Matching": containment (the baseline) or a shared stemmed term,
        # or, for a dialogue turn (a said / did record, or a note that reads as one: it asks or
        # speaks in the first or second person; docs/retrieval.md "Context"), a visible own
        # cell of the same session and namespace within WINDOW places of it (among the visible
        # ones, in log order) shares a term.
        found = {cid for cid in out if matches(query, self.cells[cid].content)}
        terms = analyse_query(query).terms
        if not terms:
            return found
        groups: dict[tuple[bytes, str], list[bytes]] = {}
        for cid, c in self.cells.items():  # log order
            if cid in out and c.owner == tok.holder:
                groups.setdefault((c.session_id, c.namespace), []).append(cid)
        for members in groups.values():
            shares = [any(t in analyse(self.cells[c].content).tf for t in terms) for c in members]
            for p, cid in enumerate(members):
                cell = self.cells[cid]
                turn = cell.kind in ("said", "did") or analyse(cell.content).turnlike
                if turn and any(shares[max(0, p - WINDOW) : p + WINDOW + 1]):
                    found.add(cid)
        return found

    def dispatch(self, tok: Tok, method: str, params: dict) -> object:
        """Run one binding call (in this process; the two-process machine alternates)."""
        return self.world.call(tok.token, method, **params)

    def reads(self, tok: Tok) -> list[set[bytes]]:
        """What each process serves ``tok`` (every cell it may see), one set per process."""
        store = self.world.store
        return [{o.cell.cell_id for o in store.read(store.authenticate(tok.token))}]

    def call(self, tok: Tok, method: str, **params: object) -> tuple[object, str | None]:
        """Run a call; return (result, None) or (None, error code). Checks authentication."""
        try:
            result = self.dispatch(tok, method, params)
        except Unauthenticated:
            assert not self._valid(tok), f"{method}: a valid token was refused"
            return None, "unauthenticated"
        except SaihmError as err:
            assert self._valid(tok), f"{method}: an invalid token got past authentication"
            return None, err.code
        assert self._valid(tok), f"{method}: an invalid token was served"
        return result, None

    def _tok(self, n: int) -> Tok:
        return self.tokens[n % len(self.tokens)]

    # -- rules: memory --------------------------------------------------------------------

    @rule(t=pick, ns=st.sampled_from(NAMESPACES), word=st.sampled_from(WORDS))
    def remember(self, t: int, ns: str, word: str) -> None:
        tok = self._tok(t)
        self.counter += 1
        content = f"note {self.counter} {word}"
        result, err = self.call(tok, "saihm_remember", content=content, namespace=ns)
        if not self._valid(tok):
            return
        if tok.namespaces is not None and ns not in tok.namespaces:
            assert err == "not_holder"
            return
        assert err is None, err
        cid = bytes.fromhex(result["cellId"])
        self.cells[cid] = CellM(tok.holder, tok.session_id, ns, content)

    @rule(t=pick, kind=st.sampled_from(("said", "did", "end")))
    def record(self, t: int, kind: str) -> None:
        tok = self._tok(t)
        self.counter += 1
        content = f"record {self.counter} {kind}"
        result, err = self.call(tok, "saihm_record", content=content, kind=kind)
        if not self._valid(tok):
            return
        if tok.namespaces is not None and "record" not in tok.namespaces:
            assert err == "not_holder"
            return
        key = (tok.holder, tok.session_id)
        if key in self.record_ended:
            assert err == "record_ended"
            return
        assert err is None, err
        seq = self.record_seq.get(key, -1) + 1
        assert result["seq"] == seq
        self.record_seq[key] = seq
        if kind == "end":
            self.record_ended.add(key)
        cid = bytes.fromhex(result["cellId"])
        self.cells[cid] = CellM(tok.holder, tok.session_id, "record", content, kind=kind)

    @rule(t=pick, query=st.sampled_from(("", *WORDS, "note record")))
    def recall(self, t: int, query: str) -> None:
        tok = self._tok(t)
        result, err = self.call(tok, "saihm_recall", query=query)
        if not self._valid(tok):
            return
        assert err is None, err
        got = {bytes.fromhex(item["cellId"]) for item in result}
        assert got == self.expected(tok, query)
        for item in result:
            cell = self.cells[bytes.fromhex(item["cellId"])]
            assert item["plaintext"] == cell.content
            assert item["namespace"] == cell.namespace

    @rule(t=pick, query=st.sampled_from(("", *WORDS)), limit=st.integers(1, 4))
    def recall_in_pages(self, t: int, query: str, limit: int) -> None:
        """Paging with the extension params ``limit`` and ``cursor`` returns every cell once."""
        tok = self._tok(t)
        seen: list[bytes] = []
        params: dict[str, object] = {"query": query, "limit": limit}
        for _ in range(200):
            result, err = self.call(tok, "saihm_recall", **params)
            if not self._valid(tok):
                return
            assert err is None, err
            assert len(result) <= limit
            seen.extend(bytes.fromhex(item["cellId"]) for item in result)
            if not getattr(result, "cut", False):
                break
            params["cursor"] = result.next_cursor
        assert len(seen) == len(set(seen)), "a cell was served twice across pages"
        assert set(seen) == self.expected(tok, query)

    @rule(t=pick, c=pick, foreign_scope=st.booleans())
    def forget(self, t: int, c: int, foreign_scope: bool) -> None:
        tok = self._tok(t)
        if foreign_scope or not self.cells:
            ids = [secrets.token_bytes(32), *self.cells]
        else:
            ids = list(self.cells)
        cid = ids[c % len(ids)]
        result, err = self.call(tok, "saihm_forget", id=cid.hex())
        if not self._valid(tok):
            return
        cell = self.cells.get(cid)
        if cell is None:
            assert (err, result) == (None, {"success": False})
        elif cell.owner != tok.holder:
            assert err == "not_holder"
        elif cell.erased:
            assert (err, result) == (None, {"success": False})
        elif not self._own_in_scope(tok, cell):
            assert err == "not_holder"
        else:
            assert err is None and result["success"] is True, (err, result)
            assert result["cellId"] == cid.hex()
            cell.erased = True

    @rule(t=pick, s=pick)
    def forget_session(self, t: int, s: int) -> None:
        tok = self._tok(t)
        sessions = sorted({x.session_id for x in self.tokens if x.holder == tok.holder})
        sid = sessions[s % len(sessions)]
        result, err = self.call(tok, "saihm_forget_session", sessionId=sid.hex())
        if not self._valid(tok):
            return
        if tok.grant_id is None and sid != tok.session_id:
            assert err == "not_holder"
            return
        assert err is None, err
        want = {
            cid
            for cid, c in self.cells.items()
            if not c.erased and c.session_id == sid and self._own_in_scope(tok, c)
        }
        assert {bytes.fromhex(x) for x in result["cellIds"]} == want
        assert len(result["receiptIds"]) == len(want)
        for cid in want:
            self.cells[cid].erased = True

    # -- rules: sharing -------------------------------------------------------------------

    @rule(
        t=pick, g=pick, shards=st.lists(pick, min_size=1, max_size=3), mode=st.sampled_from(MODES)
    )
    def share(self, t: int, g: int, shards: list[int], mode: str) -> None:
        tok = self._tok(t)
        others = [i for i in range(3) if i != tok.holder]
        grantees = [others[g % 2]] if g % 3 else others
        if not self.cells:
            return
        ids = list(self.cells)
        chosen = list(dict.fromkeys(ids[s % len(ids)] for s in shards))
        result, err = self.call(
            tok,
            "saihm_share",
            granteeIdHashesHex=[self.ids[i].hex() for i in grantees],
            shardIds=[c.hex() for c in chosen],
            type=mode,
            scope="read",
            expiryEpoch=None,
        )
        if not self._valid(tok):
            return
        for cid in chosen:
            cell = self.cells[cid]
            if cell.erased:
                assert err == "shard_not_found"
                return
            if cell.owner != tok.holder:
                assert err == "not_holder"
                return
        if not all(self._own_in_scope(tok, self.cells[c]) for c in chosen):
            assert err == "not_holder"
            return
        assert err is None, err
        expires = self._now() + 86_400 if mode == "temporary" else 0
        assert int(result["expiresAt"]) == expires
        self.contracts[bytes.fromhex(result["contractId"])] = ContractM(
            tok.holder, set(grantees), chosen, expires
        )

    @precondition(lambda self: self.contracts)
    @rule(t=pick, c=pick, accept=st.booleans())
    def respond(self, t: int, c: int, accept: bool) -> None:
        tok = self._tok(t)
        cid = list(self.contracts)[c % len(self.contracts)]
        contract = self.contracts[cid]
        method = "saihm_accept_contract" if accept else "saihm_decline_contract"
        result, err = self.call(tok, method, contractId=cid.hex())
        if not self._valid(tok):
            return
        if tok.holder not in contract.grantees:
            assert err == "not_grantee"
            return
        if contract.revoked and accept:
            assert err == "contract_revoked"
            return
        assert err is None, err
        changed = (tok.holder in contract.accepted) != accept
        assert ("receiptId" in result) == changed
        if accept:
            contract.accepted.add(tok.holder)
        else:
            contract.accepted.discard(tok.holder)

    @precondition(lambda self: self.contracts)
    @rule(t=pick, c=pick)
    def revoke(self, t: int, c: int) -> None:
        tok = self._tok(t)
        cid = list(self.contracts)[c % len(self.contracts)]
        contract = self.contracts[cid]
        result, err = self.call(tok, "saihm_revoke_share", contractId=cid.hex())
        if not self._valid(tok):
            return
        if not self._contract_in_scope(tok, contract):
            assert err == "not_holder"
            return
        assert err is None and result["revoked"] is True, (err, result)
        assert ("receiptId" in result) == (not contract.revoked)
        contract.revoked = True

    @rule(t=pick)
    def status(self, t: int) -> None:
        tok = self._tok(t)
        result, err = self.call(tok, "saihm_status")
        if not self._valid(tok):
            return
        assert err is None, err
        # A token's status reports only what that token may see.
        live = sum(1 for c in self.cells.values() if not c.erased and self._own_in_scope(tok, c))
        assert result["shards"] == ({"STANDARD": live} if live else {})
        contracts = self.contracts.items()
        own = {k for k, c in contracts if not c.revoked and self._contract_in_scope(tok, c)}
        assert {bytes.fromhex(x["contractId"]) for x in result["contracts"]} == own
        incoming = {
            k: tok.holder in c.accepted
            for k, c in self.contracts.items()
            if tok.holder in c.grantees and not c.revoked
        }
        got = {bytes.fromhex(x["contractId"]): x["accepted"] for x in result["incomingContracts"]}
        assert got == incoming
        tallies = {bytes.fromhex(p["propId"]): p for p in result["governance"]}
        assert set(tallies) == set(self.proposals)
        for pid, prop in self.proposals.items():
            votes = prop["votes"].values()
            assert int(tallies[pid]["tally_for"]) == sum(1 for v in votes if v)
            assert int(tallies[pid]["tally_against"]) == sum(1 for v in votes if not v)

    # -- rules: governance ----------------------------------------------------------------

    @rule(t=pick, upgrade=st.booleans())
    def propose(self, t: int, upgrade: bool) -> None:
        tok = self._tok(t)
        params = (
            {"scope": "protocol_upgrade"}
            if upgrade
            else {
                "scope": "emission_param",
                "paramKey": "kek_rotation_hours",
                "proposedValue": "12",
            }
        )
        result, err = self.call(tok, "saihm_governance_propose", **params)
        if not self._valid(tok):
            return
        assert err is None, err
        pid = bytes.fromhex(result["proposalId"])
        self.proposals[pid] = {"opens": self._now(), "votes": {}}

    @precondition(lambda self: self.proposals)
    @rule(t=pick, p=pick, approve=st.booleans())
    def vote(self, t: int, p: int, approve: bool) -> None:
        tok = self._tok(t)
        pid = list(self.proposals)[p % len(self.proposals)]
        prop = self.proposals[pid]
        result, err = self.call(tok, "saihm_governance_vote", proposalId=pid.hex(), approve=approve)
        if not self._valid(tok):
            return
        if tok.holder in prop["votes"]:
            assert err is None and "receiptId" not in result, (err, result)
            assert result["approve"] == prop["votes"][tok.holder]
            return
        if self._now() > prop["opens"] + self.world.config.voting_window:
            assert err == "proposal_closed"
            return
        assert err is None and "receiptId" in result, (err, result)
        prop["votes"][tok.holder] = approve

    # -- rules: capabilities, maintenance, time -------------------------------------------

    @rule(h=st.integers(0, 2), scope=st.sampled_from(GRANT_SCOPES))
    def grant(self, h: int, scope: tuple[str, ...] | None) -> None:
        token = self.world.grant_token(self.ids[h], None if scope is None else list(scope))
        cap = Capability.from_token(token)
        grant_id = cap.scope.grant_id
        assert grant_id is not None
        self.grants[grant_id] = GrantM(h, self._now() + TTL)
        ns = None if scope is None else frozenset(scope)
        self.tokens.append(Tok(h, cap.session_id, token, cap.expires_at, grant_id, ns))

    @precondition(lambda self: self.grants)
    @rule(g=pick)
    def ungrant(self, g: int) -> None:
        grant_id = list(self.grants)[g % len(self.grants)]
        grant = self.grants[grant_id]
        assert self.world.operator.admin.ungrant(grant_id) is (not grant.revoked)
        grant.revoked = True

    @rule()
    def refresh_session_tokens(self) -> None:
        """Reissue expired session tokens for the same sessions (the authority's job)."""
        for tok in self.tokens:
            if tok.grant_id is None and tok.expires_at <= self._now():
                cap = self.world.authority.issue(
                    self.ids[tok.holder], tok.session_id, CapabilityScope(), TTL, now=self._now()
                )
                tok.token, tok.expires_at = cap.to_token(), cap.expires_at

    @rule(step=st.sampled_from(CLOCK_STEPS))
    def advance_clock(self, step: int) -> None:
        self.world.clock.now += step

    @rule()
    def reopen(self) -> None:
        self.world.reopen()

    @rule()
    def rotate_kek(self) -> None:
        before = self.world.store.kek_dir.current_version
        assert self.world.store.rotate_kek() > before

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def every_token_sees_exactly_its_scope(self) -> None:
        store = self.world.store
        erased = {cid for cid, c in self.cells.items() if c.erased}
        for tok in self.tokens:
            if not self._valid(tok):
                with pytest.raises(Unauthenticated):
                    store.authenticate(tok.token)
                continue
            for got in self.reads(tok):
                assert not got & erased, "an erased cell was served"
                assert got == self.expected(tok)
        ids, _ = store.erasures()
        assert set(ids) == erased
        with store.read_txn() as txn:
            for cid in erased:
                assert not store.keyring.has_dek(txn, cid), "an erased cell's DEK survives"

    @invariant()
    def rebuild_equals_live(self) -> None:
        self.rebuilds += 1
        target = self.root / f"rebuild-{self.rebuilds}"
        try:
            report = self.world.store.rebuild_into(target)
        finally:
            shutil.rmtree(target, ignore_errors=True)
        assert report["identical"], report["difference"]

    @invariant()
    def every_receipt_verifies_and_is_included(self) -> None:
        store = self.world.store
        note = store.checkpoint_now()
        assert note is not None
        checkpoint = verify_checkpoint(note, store.log_keys.verifier_keys(), store.config.origin)
        size = store.size()
        assert checkpoint.size == size
        leaves = store.leaves(0, size)
        for index in range(self.verified, size):
            receipt = Receipt.from_cbor(leaves[index])
            signed = receipt_signed_bytes(receipt)
            assert hashlib.sha256(signed).digest() == receipt.receipt_id
            if receipt.operation == Operation.KEY:
                assert hashlib.sha256(receipt.detail).digest() == receipt.holder_id
                self.public_keys[receipt.holder_id] = receipt.detail
            pq_verify(
                self.public_keys[receipt.holder_id],
                signed,
                receipt.signature,
                context=RECEIPT_CONTEXT,
            )
        self.verified = size
        for index, leaf in enumerate(leaves):
            proof = store.inclusion_proof(index, size)
            verify_inclusion(leaf_hash(leaf), index, size, proof, checkpoint.root_hash)

    def teardown(self) -> None:
        try:
            self.world.operator.store.close()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


StoreMachine.TestCase.settings = settings(
    max_examples=200 if LONG else 15,
    stateful_step_count=50 if LONG else 20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestStoreMachine = StoreMachine.TestCase

#: Each word of the machine's cells, and a query word meaning the same but sharing no letter run.
AXES = {"apple": 0, "fruit": 0, "river": 1, "stream": 1, "stone": 2, "rock": 2}
SYNONYMS = ("fruit", "stream", "rock")


class WordAxes:
    """A deterministic embedder for the machine: one axis per meaning, and a small constant
    axis so every text has a vector (unrelated texts land far apart)."""

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        out = []
        for text in texts:
            v = [0.0, 0.0, 0.0, 0.05]
            for word in text.casefold().split():
                if word in AXES:
                    v[AXES[word]] += 1.0
            norm = math.sqrt(sum(x * x for x in v))
            out.append(tuple(x / norm for x in v))
        return out


class SemanticStoreMachine(StoreMachine):
    """The same model with the semantic stage on (issue 23): a query also finds the visible
    cells near it in meaning (at or above the gate of the dense stage), and only those; the rules
    that erase, revoke, ungrant, rotate and reopen must leave no cell found by meaning either."""

    def new_embedder(self) -> Embedder | None:
        return WordAxes()

    def expected(self, tok: Tok, query: str = "") -> set[bytes]:
        lexical = super().expected(tok, query)
        if not query.strip():
            return lexical
        embed = WordAxes().embed
        (q,) = embed([query])
        near = {
            cid
            for cid in super().expected(tok, "")
            if cosine(q, embed([self.cells[cid].content])[0]) >= DEFAULT_WEIGHTS.admits
        }
        assert len(near) <= DEFAULT_WEIGHTS.dense_k, "the model assumes every near cell is kept"
        return lexical | near

    @rule(t=pick, query=st.sampled_from(SYNONYMS))
    def recall_by_meaning(self, t: int, query: str) -> None:
        self.recall(t, query)

    @rule(t=pick, query=st.sampled_from(SYNONYMS), limit=st.integers(1, 4))
    def recall_by_meaning_in_pages(self, t: int, query: str, limit: int) -> None:
        self.recall_in_pages(t, query, limit)


SemanticStoreMachine.TestCase.settings = StoreMachine.TestCase.settings
TestSemanticStoreMachine = SemanticStoreMachine.TestCase

CHILD = Path(__file__).with_name("_sm_child.py")


class TwoProcessMachine(StoreMachine):
    """The same model with two processes, each with its own store and cache, on one data
    directory; calls alternate between them and both must see exactly the model's scope."""

    def __init__(self) -> None:
        super().__init__()
        self.turn = 0
        self.child = subprocess.Popen(
            [sys.executable, str(CHILD), str(self.world.config.data_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._ask("ready", ()) == "ready"

    def _ask(self, op: str, args: tuple) -> object:
        if op != "ready":
            data = pickle.dumps((op, self.world.clock.now, args))
            self.child.stdin.write(struct.pack(">I", len(data)) + data)
            self.child.stdin.flush()
        size = struct.unpack(">I", self.child.stdout.read(4))[0]
        answer = pickle.loads(self.child.stdout.read(size))
        if answer[0] == "err":
            raise getattr(errors, answer[1], SaihmError)(code=answer[2])
        return answer[1]

    def dispatch(self, tok: Tok, method: str, params: dict) -> object:
        self.turn += 1
        if self.turn % 2:
            return super().dispatch(tok, method, params)
        return self._ask("call", (tok.token, method, params))

    def reads(self, tok: Tok) -> list[set[bytes]]:
        other = {cell_id for cell_id, _text, _ns in self._ask("read", (tok.token,))}
        return [*super().reads(tok), other]

    def teardown(self) -> None:
        try:
            self._ask("close", ())
            self.child.wait(timeout=30)
        finally:
            if self.child.poll() is None:
                self.child.kill()
            super().teardown()


TwoProcessMachine.TestCase.settings = settings(
    max_examples=60 if LONG else 6,
    stateful_step_count=40 if LONG else 20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestTwoProcessMachine = TwoProcessMachine.TestCase
