"""Witness cosignatures and the add-checkpoint wire format (c2sp.org/tlog-cosignature,
c2sp.org/tlog-witness): the specs' own examples, round trips, mutations, and Go's note rules
for the log's own Ed25519 line in a cosigned checkpoint."""

from __future__ import annotations

import base64
import hashlib
import json
import struct

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.errors import MalformedInput
from saihm.translog import Checkpoint, LogKeys, leaf_hash, verify_checkpoint
from saihm.translog.checkpoint import _MLDSA44Signer
from saihm.translog.note import NoteError, parse_note, parse_vkey
from saihm.translog.witness import (
    COSIGNATURE_V1,
    MAX_PROOF_LINES,
    CosignatureV1Signer,
    CosignatureV1Verifier,
    add_checkpoint_body,
    append_cosignatures,
    cosignature_timestamp,
    cosignature_v1_message,
    parse_add_checkpoint,
    parse_cosignature_lines,
    verify_cosignatures,
    witness_verifier,
)
from tests.translog.reftree import vectors_dir

C2SP = json.loads((vectors_dir() / "c2sp" / "spec_examples.json").read_text())
GO = json.loads((vectors_dir() / "golang-mod-sumdb" / "note_and_tlog_vectors.json").read_text())
DASH = "\u2014 "
ORIGIN = "example.com/log"
NOW = 1_700_000_000


def _signer(name: str, clock: float = NOW) -> CosignatureV1Signer:
    seed = hashlib.sha256(name.encode()).digest()
    key = Ed25519PrivateKey.from_private_bytes(seed)
    return CosignatureV1Signer(name, key, clock=lambda: clock)


W1, W2, W3 = (_signer(f"witness.example/w{i}") for i in (1, 2, 3))


@pytest.fixture(scope="module")
def log_keys() -> LogKeys:
    seed = hashlib.sha256(b"log").digest()
    return LogKeys(ORIGIN, Ed25519PrivateKey.from_private_bytes(seed), seed)


def _note(log_keys: LogKeys, size: int = 42) -> bytes:
    return log_keys.sign(Checkpoint(ORIGIN, size, leaf_hash(b"%d" % size)), timestamp=NOW)


# -- the specs' examples -----------------------------------------------------------------------


def test_the_cosignature_v1_message_is_the_spec_example() -> None:
    """tlog-cosignature "Ed25519 signed message": "cosignature/v1", "time <T>", then the whole
    note body, each line newline-terminated."""
    example = C2SP["checkpoint_example_unverifiable"]
    body = example[: example.index("\n\n") + 1].encode()
    expected = C2SP["cosignature_v1_signed_message_example"].encode()
    assert cosignature_v1_message(body, 1679315147) == expected


def test_the_spec_example_cosignature_line_has_the_timestamped_signature_layout() -> None:
    """The example line of tlog-cosignature: key ID, then u64 timestamp (1679315147, the time
    of the signed-message example), then 64 signature bytes."""
    line = (
        "\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZC"
        "B9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
    ).encode()
    (sig,) = parse_cosignature_lines(line) and parse_note(b"x\n\n" + line)[1]
    assert sig.name == "witness.example.com/w1"
    assert len(sig.signature) == 8 + 64
    assert cosignature_timestamp(sig) == 1679315147


def test_the_spec_add_checkpoint_example_parses_and_reencodes_byte_for_byte() -> None:
    """tlog-witness "add-checkpoint" example: old size 20852014, four proof lines, an empty
    line, the checkpoint with two signatures."""
    body = C2SP["witness_add_checkpoint_request_example"].encode()
    request = parse_add_checkpoint(body)
    assert request.old_size == 20852014
    assert len(request.proof) == 4 and all(len(h) == 32 for h in request.proof)
    text, signatures = parse_note(request.note)
    assert Checkpoint.parse(text).size == 20852163
    assert len(signatures) == 2
    assert add_checkpoint_body(request.old_size, request.proof, request.note) == body


# -- keys and signatures -----------------------------------------------------------------------


def test_the_key_id_is_sha256_of_name_newline_0x04_and_key() -> None:
    """tlog-cosignature: SHA-256(<name> || "\\n" || 0x04 || 32-byte key)[:4]."""
    public = W1.verifier.public_key
    expected = hashlib.sha256(W1.name.encode() + b"\n\x04" + public).digest()[:4]
    assert W1.key_id == expected
    name, kid, sig_type, key = parse_vkey(W1.vkey())
    assert (name, kid, sig_type, key) == (W1.name, expected, COSIGNATURE_V1, public)
    assert witness_verifier(W1.vkey()).key_id == expected


def test_a_cosignature_is_ed25519_over_the_v1_message_checked_by_the_library(log_keys) -> None:
    """The line verifies with plain Ed25519 over the spec message (no saihm code involved)."""
    note = _note(log_keys)
    body = note[: note.rindex(b"\n\n") + 1]
    line = W1.cosign(body, timestamp=NOW)
    (sig,) = parse_note(b"x\n\n" + line)[1]
    assert sig.key_id == W1.key_id and cosignature_timestamp(sig) == NOW
    key = Ed25519PublicKey.from_public_bytes(W1.verifier.public_key)
    key.verify(sig.signature[8:], b"cosignature/v1\ntime %d\n" % NOW + body)
    with pytest.raises(InvalidSignature):
        key.verify(sig.signature[8:], b"cosignature/v1\ntime %d\n" % (NOW + 1) + body)


def test_private_key_round_trip_and_tampering() -> None:
    again = CosignatureV1Signer.from_skey(W1.skey())
    assert again.vkey() == W1.vkey()
    bad_id = W1.skey().replace(W1.key_id.hex(), "00000000")
    for bad in (bad_id, "PRIVATE+KEY+x", W1.skey().replace("PRIVATE", "PUBLIC")):
        with pytest.raises(NoteError):
            CosignatureV1Signer.from_skey(bad)


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(0, 2**64 - 1),
    root=st.binary(min_size=32, max_size=32),
    stamp=st.integers(0, 2**63 - 1),
    flip=st.integers(0, 10_000),
)
def test_cosign_verify_round_trip_and_any_byte_change_rejects(size, root, stamp, flip) -> None:
    body = Checkpoint(ORIGIN, size, root).body()
    line = W1.cosign(body, timestamp=stamp)
    (sig,) = parse_note(b"x\n\n" + line)[1]
    W1.verifier.verify(body, sig.signature)
    assert cosignature_timestamp(sig) == stamp
    # Change one bit of the signed body, or of the timestamped signature.
    blob = bytearray(body + sig.signature)
    blob[flip % len(blob)] ^= 1 << (flip % 8)
    other_body, other_sig = bytes(blob[: len(body)]), bytes(blob[len(body) :])
    with pytest.raises(NoteError):
        W1.verifier.verify(other_body, other_sig)


def test_cosignature_rejects_wrong_lengths_and_non_checkpoints() -> None:
    body = Checkpoint(ORIGIN, 1, leaf_hash(b"a")).body()
    line = W1.cosign(body, timestamp=NOW)
    (sig,) = parse_note(b"x\n\n" + line)[1]
    for bad in (sig.signature[:-1], sig.signature + b"\0", sig.signature[8:]):
        with pytest.raises(NoteError):
            W1.verifier.verify(body, bad)
    with pytest.raises(NoteError):
        W1.verifier.verify(b"not a checkpoint\n", sig.signature)
    with pytest.raises(NoteError):
        CosignatureV1Verifier("w", b"short")


# -- add-checkpoint bodies ---------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(old=st.integers(0, 2**64 - 1), n=st.integers(0, MAX_PROOF_LINES))
def test_request_body_round_trip(log_keys, old, n) -> None:
    proof = tuple(hashlib.sha256(b"%d" % i).digest() for i in range(n))
    note = _note(log_keys)
    request = parse_add_checkpoint(add_checkpoint_body(old, proof, note))
    assert (request.old_size, request.proof, request.note) == (old, proof, note)


@pytest.mark.parametrize(
    "head",
    [
        "old 01\n",  # leading zero
        "old -1\n",
        "old 1 \n",
        "Old 1\n",
        "old 18446744073709551616\n",  # 2**64
        "old 1\nAAAA\n",  # not a 32-byte hash
        "old 1\n" + base64.b64encode(bytes(32)).decode().rstrip("=") + "\n",  # unpadded
        "old 1\n" + (base64.b64encode(bytes(32)).decode() + "\n") * 64,  # 64 proof lines
        "old 1\n\n\n",  # an extra empty line before the checkpoint
    ],
)
def test_malformed_request_bodies_are_rejected(log_keys, head: str) -> None:
    with pytest.raises(MalformedInput):
        parse_add_checkpoint(head.encode() + b"\n" + _note(log_keys))


def test_a_request_needs_a_signed_checkpoint(log_keys) -> None:
    note = _note(log_keys)
    for bad in (b"old 0\n", b"old 0\n\n" + note[: note.index(b"\n\n") + 1], b"\xff\n\n" + note):
        with pytest.raises(MalformedInput):
            parse_add_checkpoint(bad)


# -- merging and counting cosignatures ---------------------------------------------------------


def test_append_keeps_the_note_and_skips_repeated_keys(log_keys) -> None:
    note = _note(log_keys)
    body = note[: note.rindex(b"\n\n") + 1]
    merged = append_cosignatures(note, [W1.cosign(body), W2.cosign(body)])
    assert merged.startswith(note)
    again = append_cosignatures(merged, [W1.cosign(body, timestamp=NOW + 5)])
    assert again == merged
    assert len(parse_note(merged)[1]) == 4
    with pytest.raises(NoteError):
        append_cosignatures(note, [b"not a line\n"])


def test_verify_cosignatures_counts_the_given_witnesses_only(log_keys) -> None:
    note = _note(log_keys)
    body = note[: note.rindex(b"\n\n") + 1]
    merged = append_cosignatures(note, [W1.cosign(body), W2.cosign(body)])
    keys = [W1.vkey(), W2.vkey(), W3.vkey()]
    assert verify_cosignatures(merged, keys, 2, now=NOW) == [W1.name, W2.name]
    assert verify_cosignatures(merged, [W3.vkey()], 0, now=NOW) == []
    with pytest.raises(NoteError, match="2 of the given witnesses cosigned"):
        verify_cosignatures(merged, keys, 3, now=NOW)
    with pytest.raises(NoteError):
        verify_cosignatures(note, [W1.vkey()], 1, now=NOW)
    with pytest.raises(MalformedInput):
        verify_cosignatures(merged, keys, 4, now=NOW)


def test_a_witness_with_two_keys_counts_once_with_either_line(log_keys) -> None:
    """tlog-cosignature recommends ML-DSA-44 for new deployments, so a client may accept both
    keys of a witness (one ``--witness`` each): a line of either key counts, and the witness
    counts once toward ``--min-witnesses``, which cannot exceed the number of witnesses."""
    from saihm.translog.witness import SubtreeV1Signer

    ed25519 = _signer("witness.example/both")
    mldsa44 = SubtreeV1Signer("witness.example/both", bytes(range(32)))
    note = _note(log_keys)
    body = note[: note.rindex(b"\n\n") + 1]
    both = [ed25519.vkey(), mldsa44.vkey()]
    ed_line, pq_line = ed25519.cosign(body, NOW), mldsa44.cosign(body, NOW)
    for lines in ([ed_line], [pq_line], [ed_line, pq_line]):
        merged = append_cosignatures(note, lines)
        assert verify_cosignatures(merged, both, 1, now=NOW) == ["witness.example/both"]
    with pytest.raises(MalformedInput, match="number of witnesses"):
        verify_cosignatures(merged, both, 2, now=NOW)  # two keys, one witness
    merged = append_cosignatures(merged, [W1.cosign(body)])
    assert verify_cosignatures(merged, [*both, W1.vkey()], 2, now=NOW) == [
        "witness.example/both",
        W1.name,
    ]
    other_ed25519 = CosignatureV1Signer.generate("witness.example/both").vkey()
    for keys in ([ed25519.vkey(), ed25519.vkey()], [ed25519.vkey(), other_ed25519]):
        with pytest.raises(MalformedInput):
            verify_cosignatures(merged, keys, 1, now=NOW)


def test_a_bad_cosignature_of_a_given_key_rejects(log_keys) -> None:
    note = _note(log_keys)
    other = _note(log_keys, size=43)
    wrong = W1.cosign(other[: other.rindex(b"\n\n") + 1])  # W1's line over another checkpoint
    with pytest.raises(NoteError, match="invalid cosignature"):
        verify_cosignatures(note + wrong, [W1.vkey()], 1, now=NOW)


def test_a_cosignature_stamped_in_the_future_is_not_sane(log_keys) -> None:
    """tlog-cosignature: "verifiers MAY reject cosignatures with timestamps in the future"."""
    note = _note(log_keys)
    body = note[: note.rindex(b"\n\n") + 1]
    future = append_cosignatures(note, [W1.cosign(body, timestamp=NOW + 3600)])
    with pytest.raises(NoteError, match="future"):
        verify_cosignatures(future, [W1.vkey()], 1, now=NOW)
    assert verify_cosignatures(future, [W1.vkey()], 1, now=NOW + 3600) == [W1.name]


def test_mldsa44_witness_cosignatures_count_too(log_keys) -> None:
    """A witness may cosign with ML-DSA-44 subtree/v1 (type 0x06), which the spec recommends
    for new deployments."""
    witness = LogKeys("witness.example/pq", Ed25519PrivateKey.generate(), bytes(range(32)))
    pq_vkey = witness.verifier_keys()[1]
    note = _note(log_keys)
    body = note[: note.rindex(b"\n\n") + 1]
    signer = _MLDSA44Signer("witness.example/pq", bytes(range(32)), NOW)
    blob = base64.b64encode(signer.key_id + signer.sign(body)).decode()
    merged = append_cosignatures(note, [f"{DASH}witness.example/pq {blob}\n".encode()])
    assert verify_cosignatures(merged, [pq_vkey], 1, now=NOW) == ["witness.example/pq"]


# -- the log's Ed25519 line under Go's note rules ----------------------------------------------


def go_open(note: bytes, vkeys: list[str]) -> bytes:
    """golang.org/x/mod/sumdb/note ``Open``, transcribed step by step: valid UTF-8 without
    control characters but newline; split at the last blank line; the signature block ends
    in a newline; each line is ``— name base64`` with a valid name and at least 5 decoded
    bytes; at most 100 lines; lines of unknown keys are ignored; a repeated known key is
    dropped; a known key (type 0x01 only, Go's ``NewVerifier``) must verify; one must."""
    text_all = note.decode("utf-8")  # raises on invalid UTF-8, as Open's rune loop rejects
    assert not any(ord(c) < 0x20 and c != "\n" for c in text_all)
    known = {}
    for vkey in vkeys:
        name, kid, sig_type, key = parse_vkey(vkey)
        assert sig_type == 1, "Go's note verifier supports Ed25519 (0x01) keys only"
        known[(name, kid)] = Ed25519PublicKey.from_public_bytes(key)
    split = note.rindex(b"\n\n")
    text, sigs = note[: split + 1], note[split + 2 :]
    assert sigs and sigs.endswith(b"\n")
    seen, verified, count = set(), 0, 0
    for line in sigs.split(b"\n")[:-1]:
        assert line.startswith(DASH.encode())
        name, _, b64 = line[len(DASH.encode()) :].decode().partition(" ")
        sig = base64.b64decode(b64, validate=True)
        valid_name = name and not any(c.isspace() for c in name) and "+" not in name
        assert valid_name and b64 and len(sig) >= 5
        count += 1
        assert count <= 100
        verifier = known.get((name, sig[:4]))
        if verifier is None or (name, sig[:4]) in seen:
            continue  # unknown keys are ignored; repeats of a known key are dropped
        seen.add((name, sig[:4]))
        verifier.verify(sig[4:], text)  # raises on a bad signature, as Open errors
        verified += 1
    assert verified >= 1
    return text


def test_the_log_ed25519_line_of_a_cosigned_checkpoint_verifies_under_go_rules(log_keys) -> None:
    note = _note(log_keys)
    body = note[: note.rindex(b"\n\n") + 1]
    merged = append_cosignatures(note, [W1.cosign(body), W2.cosign(body)])
    ed25519_vkey = log_keys.verifier_keys()[0]
    assert go_open(merged, [ed25519_vkey]) == body
    assert verify_checkpoint(merged, log_keys.verifier_keys(), ORIGIN).size == 42


def test_go_vector_key_signs_a_checkpoint_that_stays_valid_when_cosigned() -> None:
    """The Go vector's PeterNeumann key as the log key: its line still opens with Go's rules
    after witness lines are appended."""
    from saihm.translog.note import Ed25519Signer, sign_note

    peter = Ed25519Signer.from_skey(GO["keys"]["PeterNeumann"]["skey"])
    body = Checkpoint("PeterNeumann", 7, leaf_hash(b"x")).body()
    note = sign_note(body, [peter])
    merged = append_cosignatures(note, [W1.cosign(body), W3.cosign(body)])
    assert go_open(merged, [GO["keys"]["PeterNeumann"]["vkey"]]) == body
    assert verify_cosignatures(merged, [W1.vkey(), W3.vkey()], 2, now=NOW + 1)


def test_timestamps_are_big_endian_u64() -> None:
    body = Checkpoint(ORIGIN, 1, leaf_hash(b"a")).body()
    (sig,) = parse_note(b"x\n\n" + W1.cosign(body, timestamp=0x0102030405060708))[1]
    assert sig.signature[:8] == struct.pack(">Q", 0x0102030405060708)


def test_the_mldsa44_witness_line_is_subtree_v1_checked_with_pqcrypto(log_keys) -> None:
    """An ML-DSA-44 witness cosignature: the subtree/v1 message with the witness's name as
    cosigner name and start = 0, verified by pqcrypto, an independent implementation."""
    from pqcrypto.sign.ml_dsa_44 import verify as pq_verify

    from saihm.translog.checkpoint import cosigned_message
    from saihm.translog.witness import SubtreeV1Signer

    signer = SubtreeV1Signer("witness.example/pq", bytes(range(32)), clock=lambda: NOW)
    note = _note(log_keys)
    body = note[: note.rindex(b"\n\n") + 1]
    (sig,) = parse_note(b"x\n\n" + signer.cosign(body))[1]
    name, kid, sig_type, public = parse_vkey(signer.vkey())
    assert (name, kid, sig_type, len(public)) == (signer.name, sig.key_id, 0x06, 1312)
    assert cosignature_timestamp(sig) == NOW and len(sig.signature) == 8 + 2420
    message = cosigned_message(signer.name, NOW, ORIGIN, 42, leaf_hash(b"42"))
    assert message.startswith(b"subtree/v1\n\x00" + bytes([len(signer.name)]))
    pq_verify(public, message, sig.signature[8:], context=b"")
    assert SubtreeV1Signer.from_skey(signer.skey()).vkey() == signer.vkey()
    merged = append_cosignatures(note, [signer.cosign(body), W1.cosign(body)])
    assert verify_cosignatures(merged, [signer.vkey(), W1.vkey()], 2, now=NOW) == [
        signer.name,
        W1.name,
    ]
