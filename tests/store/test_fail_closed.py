"""Access state fails closed (issue 11, Build 2; requirements.txt: a record is signed "so a later
change is detectable even to someone with direct database access").

Each attack is made with raw LMDB writes, the way the issue reported it: forged contract
entries, a widened shard list, a forged acceptance, a grant's revoked flag flipped back, index
entries copied between holders and sessions, a holder record moved. After each, no token sees a
plaintext it could not see before, and ``saihm verify --data`` reports the edit by database and
key. A session token's status, revoke and forget are limited to what it may see, and session
tokens can be revoked.
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from saihm.errors import SaihmError
from saihm.offline.fsck import check_store
from saihm.projections import apply as PJ
from saihm.projections.keys import dumps, loads, u64
from saihm.projections.seal import TAG_BYTES
from saihm.protocol import call as binding_call
from saihm.storage import WriteTxn

from ..support.postgres import lmdb_only
from ..support.serve import SAIHM, post, serving
from .populated import Populated, clone, populate

Attack = Callable[[Populated, WriteTxn], None]


def _db(p: Populated, name: bytes) -> object:
    return p.world.store.projections.db[name]


def _value(txn: WriteTxn, p: Populated, name: bytes, key: bytes) -> object:
    return loads(bytes(txn.get(key, db=_db(p, name)))[:-TAG_BYTES])


def _edit(p: Populated, txn: WriteTxn, name: bytes, key: bytes, change) -> None:
    """Decode a record, change it and store it back with its old MAC (an attacker cannot make a
    new one without the KEK directory)."""
    raw = bytes(txn.get(key, db=_db(p, name)))
    record = loads(raw[:-TAG_BYTES])
    change(record)
    txn.put(key, dumps(record) + raw[-TAG_BYTES:], db=_db(p, name))


def forge_contract(p: Populated, txn: WriteTxn) -> None:
    """The issue's attack: two raw entries, a contract record and its grantee index entry, with
    no receipt, body or signature, offering alice's unshared cell to bob."""
    contract_id = b"\x42" * 32
    alice, bob = p.holders["alice"], p.holders["bob"]
    record = {
        1: alice,
        2: [bob],
        3: [p.cells["a1"]],
        4: "PERMANENT",
        5: "read",
        6: 0,
        7: 0,
        8: 1,
        9: False,
        10: [bob],
    }
    txn.put(contract_id, dumps(record), db=_db(p, PJ.CONTRACTS))
    txn.put(bob + contract_id, b"", db=_db(p, PJ.BY_GRANTEE))


def forge_contract_with_copied_macs(p: Populated, txn: WriteTxn) -> None:
    """The same, reusing MACs taken from authentic records of the same databases."""
    real = p.contracts["accepted"]
    raw = bytes(txn.get(real, db=_db(p, PJ.CONTRACTS)))
    index_mac = bytes(txn.get(p.holders["bob"] + real, db=_db(p, PJ.BY_GRANTEE)))
    contract_id = b"\x43" * 32
    record = loads(raw[:-TAG_BYTES])
    record[3] = [p.cells["a1"], p.cells["a2"]]
    txn.put(contract_id, dumps(record) + raw[-TAG_BYTES:], db=_db(p, PJ.CONTRACTS))
    txn.put(p.holders["bob"] + contract_id, index_mac, db=_db(p, PJ.BY_GRANTEE))


def widen_shards(p: Populated, txn: WriteTxn) -> None:
    _edit(
        p,
        txn,
        PJ.CONTRACTS,
        p.contracts["accepted"],
        lambda r: r[3].extend([p.cells["a1"], p.cells["a2"], p.cells["a1_work"]]),
    )


def widen_grantees(p: Populated, txn: WriteTxn) -> None:
    """Add carol to the accepted contract (grantees and acceptances) and index her."""

    def change(record: dict) -> None:
        record[2].append(p.holders["carol"])
        record[10] = sorted([*record[10], p.holders["carol"]])

    _edit(p, txn, PJ.CONTRACTS, p.contracts["accepted"], change)
    mac = bytes(txn.get(p.holders["bob"] + p.contracts["accepted"], db=_db(p, PJ.BY_GRANTEE)))
    txn.put(p.holders["carol"] + p.contracts["accepted"], mac, db=_db(p, PJ.BY_GRANTEE))


def forge_acceptance(p: Populated, txn: WriteTxn) -> None:
    """Carol never accepted the offered contract; mark her as having accepted it."""
    _edit(
        p,
        txn,
        PJ.CONTRACTS,
        p.contracts["offered"],
        lambda r: r.__setitem__(10, [p.holders["carol"]]),
    )


def unrevoke_contract(p: Populated, txn: WriteTxn) -> None:
    _edit(p, txn, PJ.CONTRACTS, p.contracts["revoked"], lambda r: r.__setitem__(9, False))


def unrevoke_grant(p: Populated, txn: WriteTxn) -> None:
    _edit(p, txn, PJ.GRANTS, p.grants["withdrawn"], lambda r: r.__setitem__(5, False))


def extend_grant_expiry(p: Populated, txn: WriteTxn) -> None:
    _edit(p, txn, PJ.GRANTS, p.grants["all"], lambda r: r.__setitem__(3, 2**40))


def forge_grant(p: Populated, txn: WriteTxn) -> None:
    """Replace the withdrawn grant's record by a fresh unsigned one."""
    record = {1: p.holders["alice"], 2: None, 3: 2**40, 4: 1, 5: False}
    txn.put(p.grants["withdrawn"], dumps(record), db=_db(p, PJ.GRANTS))


def copy_cells_to_bob(p: Populated, txn: WriteTxn) -> None:
    """Copy alice's holder-index entries under bob's prefix, and move a cell record's owner."""
    alice, bob = p.holders["alice"], p.holders["bob"]
    entries = [(bytes(k), bytes(v)) for k, v in txn.scan(_db(p, PJ.BY_HOLDER), prefix=alice)]
    for key, value in entries:
        txn.put(bob + key[32:], value, db=_db(p, PJ.BY_HOLDER))
    _edit(p, txn, PJ.CELLS, p.cells["a1"], lambda r: r.__setitem__(1, bob))


def copy_session_index(p: Populated, txn: WriteTxn) -> None:
    """Copy every session-index entry under the prefix of alice's first session."""
    tag = p.world.store.session_tag(p.holders["alice"], _session_of(p, "a1"))
    entries = [(bytes(k), bytes(v)) for k, v in txn.scan(_db(p, PJ.BY_SESSION))]
    for n, (_, value) in enumerate(entries):
        txn.put(tag + u64(10_000 + n), value, db=_db(p, PJ.BY_SESSION))


def move_holder_record(p: Populated, txn: WriteTxn) -> None:
    """Give bob's holder record alice's public key (so alice's signatures pass as bob's)."""
    alice = bytes(txn.get(p.holders["alice"], db=_db(p, PJ.HOLDERS)))
    txn.put(p.holders["bob"], alice, db=_db(p, PJ.HOLDERS))


def drop_session_revocation_mac(p: Populated, txn: WriteTxn) -> None:
    """Edit the revoked session's revocation record (its MAC then fails): the authentic
    records no longer match their sealed count, so every token is refused (fail closed)."""
    key, value = next(txn.scan(_db(p, PJ.REVOKED)))
    # Flip a bit of the last byte: setting it to zero left it as it was once in 256 runs.
    value = bytes(value)
    txn.put(bytes(key), value[:-1] + bytes([value[-1] ^ 1]), db=_db(p, PJ.REVOKED))


def _session_of(p: Populated, name: str) -> bytes:
    from saihm.events import Capability

    return Capability.from_token(p.tokens[name]).session_id


ATTACKS: dict[str, Attack] = {
    f.__name__: f
    for f in (
        forge_contract,
        forge_contract_with_copied_macs,
        widen_shards,
        widen_grantees,
        forge_acceptance,
        unrevoke_contract,
        unrevoke_grant,
        extend_grant_expiry,
        forge_grant,
        copy_cells_to_bob,
        copy_session_index,
        move_holder_record,
        drop_session_revocation_mac,
    )
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Populated, Path]:
    root = tmp_path_factory.mktemp("fail-closed")
    p = populate(root)
    p.baseline = p.views()  # type: ignore[attr-defined]
    p.world.store.close()
    return p, root


@pytest.fixture
def populated(template: tuple[Populated, Path], tmp_path: Path) -> Populated:
    p = clone(*template, tmp_path / "copy")
    yield p
    p.world.store.close()


def _no_wider(p: Populated, after: dict) -> None:
    for token, seen in after.items():
        before = p.baseline[token] or frozenset()  # type: ignore[attr-defined]
        assert seen is None or seen <= before, (token, sorted(seen - before))


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_raw_edit_of_access_state_grants_nothing_and_is_found(populated, attack, caplog):
    p = populated
    with p.world.store.storage.write() as txn:
        ATTACKS[attack](p, txn)
    p.world.reopen()
    with caplog.at_level(logging.WARNING, logger="saihm.store"):
        after = p.views()
    _no_wider(p, after)
    for text in ("alice one secret", "alice session two secret", "alice work secret"):
        assert text not in (after["bob"] or set()) and text not in (after["carol"] or set())
    assert after["a_withdrawn"] is None and after["a_revoked"] is None
    # The warning names the database and the key, never a value or a plaintext.
    for record in caplog.records:
        assert "secret" not in record.getMessage()
    result = check_store(p.world.store)
    assert result.findings, attack
    assert all(f.database and f.check for f in result.findings)


@lmdb_only("`saihm verify --data` reads DATA/lmdb only (saihm/audit/datadir.py)")
def test_the_issue_attack_through_http_shows_no_plaintext_of_another_holder(tmp_path):
    """Every attack at once on a stopped operator, then a real ``saihm serve`` over HTTP.

    All but the edited revocation record, which makes every token fail closed (503: the
    revocations no longer match their sealed count; tests/store/test_revocation_count.py)
    and would leave nothing here to check."""
    p = populate(tmp_path)
    baseline = p.views()
    with p.world.store.storage.write() as txn:
        for name, attack in ATTACKS.items():
            if name != "drop_session_revocation_mac":
                attack(p, txn)
    p.world.store.close()
    data = p.world.config.data_dir
    with serving(tmp_path, "--data", str(data)) as (_, url):
        for name, token in p.tokens.items():
            status, body = post(url, token, "saihm_recall", {})
            assert status in (200, 401), (name, status, body)
            if status == 401:
                assert body == {"error": "unauthenticated"}
                continue
            seen = {item["plaintext"] for item in body}
            assert seen <= (baseline[name] or set()), (name, seen)
        # Alice's own session token still reads only its session (no widened scope).
        status, body = post(url, p.tokens["a1"], "saihm_status", {})
        assert status == 200
    done = subprocess.run(
        [SAIHM, "verify", "--data", str(data), "--json", "--no-progress"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    report = json.loads(done.stdout)
    databases = {f.get("database") for f in report["failures"]}
    assert {"p_contracts", "p_contracts_by_grantee", "p_grants", "p_holders"} <= databases


# -- what a session token may do -------------------------------------------------------------


def test_a_session_tokens_status_shows_only_its_sessions_shards_and_contracts(populated):
    p = populated
    a2 = binding_call(p.world.operator, p.tokens["a2"], "saihm_status", {})
    a1 = binding_call(p.world.operator, p.tokens["a1"], "saihm_status", {})
    every = binding_call(p.world.operator, p.tokens["a_all"], "saihm_status", {})
    # a2 wrote one memory cell; a1 wrote three live cells and one record cell.
    assert sum(a2["shards"].values()) == 1
    assert sum(a1["shards"].values()) == 4
    assert sum(every["shards"].values()) == 5
    # The contracts of a1's cells are a1's; a2's only contract is revoked, so none is listed.
    assert {c["contractId"] for c in a1["contracts"]} == {
        p.contracts["accepted"].hex(),
        p.contracts["offered"].hex(),
    }
    assert a2["contracts"] == []
    memory_only = binding_call(p.world.operator, p.tokens["a_memory"], "saihm_status", {})
    assert sum(memory_only["shards"].values()) == 3  # memory cells only: not work, record


def test_a_session_token_cannot_revoke_another_sessions_contract(populated):
    p = populated
    offered = p.contracts["offered"].hex()
    with pytest.raises(SaihmError) as info:
        binding_call(
            p.world.operator, p.tokens["a2"], "saihm_revoke_share", {"contractId": offered}
        )
    assert info.value.code == "not_holder"
    done = binding_call(
        p.world.operator, p.tokens["a1"], "saihm_revoke_share", {"contractId": offered}
    )
    assert done["revoked"] is True


def test_a_session_token_cannot_forget_another_sessions_cell(populated):
    p = populated
    with pytest.raises(SaihmError) as info:
        binding_call(p.world.operator, p.tokens["a2"], "saihm_forget", {"id": p.cells["a1"].hex()})
    assert info.value.code == "not_holder"
    assert "alice one secret" in p.recall("a1")


def test_a_revoked_session_token_is_refused_and_the_revocation_is_logged(populated):
    p = populated
    world = p.world
    session_id, token = world.session(p.holders["alice"])
    binding_call(world.operator, token, "saihm_remember", {"content": "before revocation"})
    assert world.operator.admin.revoke_session(p.holders["alice"], session_id) is True
    assert world.operator.admin.revoke_session(p.holders["alice"], session_id) is False
    with pytest.raises(SaihmError) as info:
        binding_call(world.operator, token, "saihm_recall", {})
    assert info.value.code == "unauthenticated"
    subject = PJ.revocation_subject(p.holders["alice"], session_id)
    found, _ = world.store.receipts("subjectId", subject)
    assert len(found) == 1
    # The public log names a hash, never the session id itself.
    assert session_id not in b"".join(leaf for _, leaf in found)
    # Other sessions of the holder are untouched.
    assert "alice one secret" in p.recall("a1")


def test_a_token_id_revokes_one_token_and_not_its_session(populated):
    from saihm.events import Capability

    p = populated
    world = p.world
    session_id, first = world.session(p.holders["alice"])
    second = world.authority.issue(
        p.holders["alice"],
        session_id,
        Capability.from_token(first).scope,
        3600,
        now=int(world.clock()),
    ).to_token()
    world.operator.admin.revoke_session(p.holders["alice"], Capability.from_token(first).token_id)
    with pytest.raises(SaihmError):
        binding_call(world.operator, first, "saihm_recall", {})
    assert binding_call(world.operator, second, "saihm_recall", {}) == []


def test_session_revoke_on_the_command_line_takes_effect_in_a_running_server(tmp_path):
    """Two processes: ``saihm session revoke`` beside a running ``saihm serve``."""
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        made = json.loads(
            subprocess.run(
                [SAIHM, "holder", "create", "--data", str(data)], capture_output=True, check=True
            ).stdout
        )
        argv = [SAIHM, "session", "revoke", "--data", str(data), "--holder", made["holderId"]]
        status, _ = post(url, made["token"], "saihm_remember", {"content": "kept"})
        assert status == 200
        done = subprocess.run([*argv, made["sessionId"]], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["changed"] is True
        status, body = post(url, made["token"], "saihm_recall", {})
        assert (status, body) == (401, {"error": "unauthenticated"})
        again = subprocess.run([*argv, made["sessionId"]], capture_output=True, text=True)
        assert json.loads(again.stdout)["changed"] is False
    for wrong in ("abcd", "zz" * 32, "ab" * 20):
        bad = subprocess.run([*argv, wrong], capture_output=True, text=True)
        assert bad.returncode == 2, wrong
        assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
