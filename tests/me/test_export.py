"""The person's export (``GET /me/v1/export``): one file ``saihm verify FILE`` checks offline.

Export, then verify (in process and with the command line); then each part of the file
tampered with, one at a time, fails verification naming the check (docs/formats.md §5.1)."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.audit.bundle import Bundle, PersonExport, PersonMemory
from saihm.audit.report import Report
from saihm.audit.verifier import verify_bundle
from saihm.events import Cell
from saihm.operator import Operator
from tests.me.authenticator import Authenticator
from tests.me.test_person import ORIGIN, Person, _size, call, enrol
from tests.me.test_person import client as client
from tests.me.test_person import state as state
from tests.support.serve import SAIHM
from tests.support.world import authority as authority
from tests.support.world import config as config
from tests.support.world import operator as operator

EMPTY = Bundle(
    origin="o",
    leaves=[],
    checkpoints=[],
    log_keys=[],
    authority_public_key=b"",
    erasures=[],
    erasures_tree_size=0,
)
TEXTS = ("I prefer green tea in the morning", "my sister lives in Bergen")


async def _export(client, token) -> tuple[int, bytes, dict]:
    headers = {"Authorization": f"Bearer {token}", "Origin": ORIGIN}
    async with client.get("/me/v1/export", headers=headers) as resp:
        return resp.status, await resp.read(), dict(resp.headers)


@pytest.fixture
async def exported(client, operator: Operator, authority, state) -> tuple[Person, Bundle]:
    person = Person(operator, authority)
    for text in TEXTS:
        operator.memory.remember(operator.store.authenticate(person.session_token), text)
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    status, _ = await call(client, token, "saihm_remember", {"content": "added on the page"})
    assert status == 200
    size = _size(operator)
    status, raw, headers = await _export(client, token)
    assert status == 200, raw
    assert headers["Content-Type"] == "application/cbor"
    assert headers["Cache-Control"] == "no-store"
    assert _size(operator) == size  # making the file logs nothing
    return person, Bundle.from_cbor(raw)


def _verify(bundle: Bundle) -> Report:
    return verify_bundle(Bundle.from_cbor(bundle.to_cbor()))


async def test_the_export_holds_every_memory_and_verifies(exported, tmp_path):
    person, bundle = exported
    assert bundle.person is not None and bundle.person.holder_id == person.holder_id
    texts = sorted(m.plaintext for m in bundle.person.memories)
    assert texts == sorted([*TEXTS, "added on the page"])
    report = _verify(bundle)
    assert report.ok, report.render()
    assert report.person_memories == 3 and report.inclusion_proofs == 4  # KEY + 3 REMEMBER
    path = tmp_path / "memory.saihm"
    path.write_bytes(bundle.to_cbor())
    done = subprocess.run(
        [SAIHM, "verify", str(path), "--no-progress"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "person export     3 memories" in done.stdout
    # with the log's keys pinned (as a stranger would get them from elsewhere)
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(k + "\n" for k in bundle.log_keys))
    done = subprocess.run(
        [SAIHM, "verify", str(path), "--trust", str(keys), "--no-progress"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "RESULT: OK — every check held" in done.stdout, done.stdout
    # a file whose plaintext was edited: exit 1, the check named
    edited = _memory(bundle, plaintext="something else entirely, and longer than before")
    path.write_bytes(edited.to_cbor())
    done = subprocess.run(
        [SAIHM, "verify", str(path), "--no-progress"], capture_output=True, text=True
    )
    assert done.returncode == 1 and "[plaintext]" in done.stdout, done.stdout


async def test_an_empty_memory_exports_its_key_receipt_and_verifies(
    client, operator: Operator, authority, state
):
    person = Person(operator, authority)
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    status, raw, _ = await _export(client, token)
    assert status == 200
    bundle = Bundle.from_cbor(raw)
    assert bundle.person is not None and bundle.person.memories == []
    report = _verify(bundle)
    assert report.ok and report.person_memories == 0 and report.inclusion_proofs == 1


def _with(bundle: Bundle, **changes) -> Bundle:
    assert bundle.person is not None
    return dataclasses.replace(bundle, person=dataclasses.replace(bundle.person, **changes))


def _memory(bundle: Bundle, **changes) -> Bundle:
    assert bundle.person is not None
    first, *rest = bundle.person.memories
    return _with(bundle, memories=[dataclasses.replace(first, **changes), *rest])


def _receipt(bundle: Bundle, position: int, leaf=None, proof=None) -> Bundle:
    assert bundle.person is not None
    receipts = list(bundle.person.receipts)
    index, old_leaf, old_proof = receipts[position]
    receipts[position] = (index, leaf or old_leaf, old_proof if proof is None else proof)
    return _with(bundle, receipts=receipts)


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


def _first_check(bundle: Bundle) -> str:
    report = _verify(bundle)
    assert not report.ok
    return report.failures[0].check


def _checks(bundle: Bundle) -> set[str]:
    return {f.check for f in _verify(bundle).failures}


async def test_a_tampered_plaintext_fails_naming_the_check(exported):
    _, bundle = exported
    assert bundle.person is not None
    text = bundle.person.memories[0].plaintext
    assert _first_check(_memory(bundle, plaintext=text + " and coffee")) == "plaintext"
    assert _first_check(_memory(bundle, namespace="elsewhere")) == "plaintext"


async def test_a_memory_under_another_cell_fails(exported):
    _, bundle = exported
    assert bundle.person is not None
    second = bundle.person.memories[1]
    # the plaintext moved to another memory's cellId: its receipt does not name that cell
    assert _first_check(_memory(bundle, cell_id=second.cell_id)) == "memory"
    # the signed cell swapped for another memory's: it is not the cell the receipt names
    assert _first_check(_memory(bundle, cell=second.cell)) == "cell"


async def test_a_tampered_cell_fails(exported):
    _, bundle = exported
    assert bundle.person is not None
    cell = Cell.from_cbor(bundle.person.memories[0].cell)
    bad = cell.model_copy(update={"ciphertext": _flip(cell.ciphertext, 0)})
    assert _first_check(_memory(bundle, cell=bad.to_cbor())) == "cell"
    bad = cell.model_copy(update={"signature": _flip(cell.signature, 5)})
    assert _first_check(_memory(bundle, cell=bad.to_cbor())) == "cell"


async def test_a_tampered_receipt_fails(exported):
    from saihm.events import Receipt

    _, bundle = exported
    assert bundle.person is not None
    leaf = bundle.person.receipts[1][1]
    receipt = Receipt.from_cbor(leaf)
    forged = receipt.model_copy(update={"signature": _flip(receipt.signature, 9)}).to_cbor()
    # a forged signature: the signature check fails, and the leaf is no longer the logged one
    assert _checks(_receipt(bundle, 1, leaf=forged)) == {"signature", "inclusion", "memory"}
    # a changed field: the receiptId no longer matches
    assert _first_check(_receipt(bundle, 1, leaf=_flip(leaf, 40))) in {"encoding", "receipt id"}
    # a receipt dropped: its memory has no checked receipt
    assert _first_check(_with(bundle, receipts=bundle.person.receipts[:1])) == "memory"


async def test_a_tampered_proof_or_checkpoint_fails(exported):
    _, bundle = exported
    assert bundle.person is not None
    proof = bundle.person.receipts[1][2]
    assert proof, "a proof with at least one hash"
    bad = [_flip(proof[0], 0), *proof[1:]]
    assert _first_check(_receipt(bundle, 1, proof=bad)) == "inclusion"
    note = bundle.person.checkpoint
    at = note.index(b"\n") + 1  # the size line
    assert _first_check(_with(bundle, checkpoint=_flip(note, at))) == "person checkpoint"


async def test_another_holders_export_cannot_pass_as_this_one(exported):
    _, bundle = exported
    assert bundle.person is not None
    assert _first_check(_with(bundle, holder_id=b"\x07" * 32)) == "person receipts"


def test_a_malformed_person_member_is_refused_before_verifying():
    from saihm.errors import MalformedInput
    from saihm.events.codec import decode, encode

    good = dataclasses.replace(EMPTY, person=PersonExport(b"\x01" * 32, b"note", [], [])).to_cbor()
    assert Bundle.from_cbor(good).person is not None
    m = decode(good)
    m["person"]["memories"] = [{"cellId": b"x"}]
    with pytest.raises(MalformedInput):
        Bundle.from_cbor(encode(m))
    m["person"] = {"holderId": b"x"}
    with pytest.raises(MalformedInput):
        Bundle.from_cbor(encode(m))


_ids = st.binary(min_size=32, max_size=32)
_memories = st.builds(
    PersonMemory,
    cell_id=_ids,
    plaintext=st.text(max_size=40),
    kind=st.sampled_from(["memory", "said", "did", "end"]),
    namespace=st.text(min_size=1, max_size=10),
    session_id=_ids,
    seq=st.none() | st.integers(0, 2**64 - 1),
    prev=st.none() | _ids,
    receipt=st.integers(0, 2**64 - 1),
    cell=st.binary(max_size=40),
)
_person = st.builds(
    PersonExport,
    holder_id=_ids,
    checkpoint=st.binary(max_size=40),
    receipts=st.lists(
        st.tuples(st.integers(0, 2**64 - 1), st.binary(max_size=20), st.lists(_ids, max_size=3)),
        max_size=3,
    ),
    memories=st.lists(_memories, max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(_person)
def test_the_person_member_round_trips(person: PersonExport) -> None:
    bundle = dataclasses.replace(EMPTY, person=person)
    raw = bundle.to_cbor()
    again = Bundle.from_cbor(raw)
    assert again.person == person and again.to_cbor() == raw


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-5, 2**64 - 1)
        | st.text(max_size=8)
        | st.binary(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=10)
        ),
        max_leaves=30,
    )
)
def test_any_person_member_is_read_or_refused_cleanly(value) -> None:
    from saihm.errors import MalformedInput
    from saihm.events.codec import decode, encode

    m = decode(EMPTY.to_cbor())
    m["person"] = value
    raw = encode(m)
    try:
        read = Bundle.from_cbor(raw)
    except MalformedInput as err:
        assert "person" in str(err) or "bundle" in str(err)
    else:  # what is read is exactly what was there
        assert read.person is not None and read.to_cbor() == raw


async def test_a_memory_that_replaced_another_with_metadata_exports_and_verifies(
    client, operator: Operator, authority, state
):
    # The sealed payload's optional keys (supersedes, metadata; docs/formats.md §3) are in the
    # file, so the plaintext check seals what the cell sealed; without them it could not hold.
    person = Person(operator, authority)
    access = operator.store.authenticate(person.session_token)
    old = operator.memory.remember(access, "lives in Oslo")
    operator.memory.remember(
        access, "moved to Bergen", supersedes=old.cell_id, metadata='{"key":"home"}'
    )
    token = await enrol(client, state, person.holder_id, Authenticator(ORIGIN))
    status, raw, _ = await _export(client, token)
    assert status == 200, raw
    bundle = Bundle.from_cbor(raw)
    assert bundle.person is not None
    [memory] = bundle.person.memories
    assert (memory.plaintext, memory.supersedes, memory.metadata) == (
        "moved to Bergen",
        old.cell_id,
        '{"key":"home"}',
    )
    assert _verify(bundle).ok, _verify(bundle).render()
    for field in ("supersedes", "metadata"):
        dropped = _memory(bundle, **{field: None})
        report = _verify(dropped)
        assert not report.ok and "[plaintext]" in report.render()
