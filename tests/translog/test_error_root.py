"""One error root: nothing but a ``SaihmError`` escapes a public function of saihm.translog.

Hypothesis calls each public decoder, constructor and proof function with valid arguments of
which any may be replaced by a hostile value (wrong type, huge or negative integer, junk bytes,
junk text, containers, None). Whatever the function does, the only exception allowed out is a
``SaihmError`` (``ProofError`` and ``NoteError`` are two): never ``ValueError``, ``TypeError``,
``KeyError``, ``IndexError``, ``struct.error`` or ``binascii.Error``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.errors import MalformedInput, SaihmError
from saihm.translog import (
    Checkpoint,
    LogKeys,
    MemoryTree,
    ProofError,
    leaf_hash,
    node_hash,
    proof,
    root_from_inclusion,
    tiles,
    verify_checkpoint,
    verify_consistency,
    verify_inclusion,
    witness,
)
from saihm.translog import note as note_mod
from saihm.translog.checkpoint import cosigned_message, verifier_from_key
from saihm.translog.tilenodes import TileNodes, perfect_root
from tests.support.error_root import call_allowing_saihm_errors as _call
from tests.support.error_root import hostile_values, with_hostile_arguments

HOSTILE = hostile_values(b"\x00" * 32, b"\n", "\n", 1 << 64, (1 << 64) - 1, -1, 0, object())

_KEYS = LogKeys.generate("example.com/log")
_TREE = MemoryTree([b"a", b"b", b"c", b"d", b"e"])
_ROOT = _TREE.root()
_NOTE = _KEYS.sign(Checkpoint("example.com/log", 5, _ROOT))
_W = witness.CosignatureV1Signer.generate("witness.example")
# A note signer: a cosigner (_W) signs cosignatures, not notes, so it has no ``sign``.
_SIGNER = note_mod.Ed25519Signer("signer.example", Ed25519PrivateKey.generate())


def _fetch(ids: Any) -> list[bytes]:
    return _TREE.fetch(ids)


# (name, function, valid positional arguments)
CASES: list[tuple[str, Callable[..., Any], list[Any]]] = [
    ("leaf_hash", leaf_hash, [b"x"]),
    ("node_hash", node_hash, [b"\x00" * 32, b"\x01" * 32]),
    (
        "verify_inclusion",
        verify_inclusion,
        [leaf_hash(b"a"), 0, 5, _TREE.inclusion_proof(0), _ROOT],
    ),
    ("root_from_inclusion", root_from_inclusion, [leaf_hash(b"a"), 0, 5, _TREE.inclusion_proof(0)]),
    (
        "verify_consistency",
        verify_consistency,
        [2, 5, _TREE.consistency_proof(2), _TREE.root(2), _ROOT],
    ),
    ("proof.root", lambda size: proof.root(size, _fetch), [5]),
    ("proof.inclusion_proof", lambda i, n: proof.inclusion_proof(i, n, _fetch), [1, 5]),
    ("proof.consistency_proof", lambda m, n: proof.consistency_proof(m, n, _fetch), [1, 5]),
    ("proof.range_nodes", proof.range_nodes, [1, 5]),
    ("MemoryTree", MemoryTree, [[b"a"]]),
    ("MemoryTree.append_many", lambda leaves: MemoryTree().append_many(leaves), [[b"a"]]),
    ("MemoryTree.append_hashes", lambda h: MemoryTree().append_hashes(h), [[b"\x00" * 32]]),
    ("MemoryTree.root", _TREE.root, [3]),
    ("MemoryTree.inclusion_proof", _TREE.inclusion_proof, [1, 3]),
    ("MemoryTree.consistency_proof", _TREE.consistency_proof, [1, 3]),
    ("TileNodes", lambda t, ids: TileNodes(lambda level, index: t)(ids), [b"\x00" * 64, [(1, 0)]]),
    ("perfect_root", perfect_root, [b"\x00" * 64]),
    ("tiles.format_index", tiles.format_index, [1234067]),
    ("tiles.tile_path", tiles.tile_path, [0, 5, 3]),
    ("tiles.parse_tile_path", tiles.parse_tile_path, ["tile/0/x001/234.p/5"]),
    ("tiles.tile_widths", tiles.tile_widths, [1000, 0]),
    ("tiles.encode_entry_bundle", tiles.encode_entry_bundle, [[b"a", b"b"]]),
    ("tiles.decode_entry_bundle", tiles.decode_entry_bundle, [b"\x00\x01a"]),
    ("note.b64decode_strict", note_mod.b64decode_strict, ["AAAA"]),
    ("note.check_key_name", note_mod.check_key_name, ["example.com/log"]),
    ("note.parse_vkey", note_mod.parse_vkey, [_KEYS.verifier_keys()[0]]),
    ("note.parse_note", note_mod.parse_note, [_NOTE]),
    ("note.sign_note", lambda text: note_mod.sign_note(text, [_SIGNER]), [b"hello\n"]),
    (
        "note.Ed25519Verifier.from_vkey",
        note_mod.Ed25519Verifier.from_vkey,
        [_KEYS.verifier_keys()[0]],
    ),
    ("note.Ed25519Verifier", note_mod.Ed25519Verifier, ["name", b"\x00" * 32]),
    (
        "note.Ed25519Signer.from_skey",
        note_mod.Ed25519Signer.from_skey,
        ["PRIVATE+KEY+a+00000000+AA=="],
    ),
    ("Checkpoint", Checkpoint, ["example.com/log", 5, _ROOT]),
    ("Checkpoint.parse", Checkpoint.parse, [_NOTE.split(b"\n\n")[0] + b"\n"]),
    ("cosigned_message", cosigned_message, ["w", 1, "example.com/log", 5, _ROOT]),
    ("verifier_from_key", verifier_from_key, [_KEYS.verifier_keys()[1]]),
    ("verify_checkpoint", verify_checkpoint, [_NOTE, _KEYS.verifier_keys()]),
    ("LogKeys.generate", LogKeys.generate, ["example.com/log"]),
    ("witness.cosignature_v1_message", witness.cosignature_v1_message, [b"body\n", 1]),
    ("witness.witness_verifier", witness.witness_verifier, [_W.vkey()]),
    ("witness.CosignatureV1Signer.from_skey", witness.CosignatureV1Signer.from_skey, [_W.skey()]),
    ("witness.CosignatureV1Verifier", witness.CosignatureV1Verifier, ["w", b"\x00" * 32]),
    (
        "witness.SubtreeV1Signer.from_skey",
        witness.SubtreeV1Signer.from_skey,
        ["PRIVATE+KEY+w+00000000+BgA="],
    ),
    (
        "witness.add_checkpoint_body",
        witness.add_checkpoint_body,
        [2, _TREE.consistency_proof(2), _NOTE],
    ),
    ("witness.parse_add_checkpoint", witness.parse_add_checkpoint, [b"old 0\n\n" + _NOTE]),
    (
        "witness.parse_cosignature_lines",
        witness.parse_cosignature_lines,
        [b"\xe2\x80\x94 w AAAA\n"],
    ),
    (
        "witness.append_cosignatures",
        witness.append_cosignatures,
        [_NOTE, [b"\xe2\x80\x94 w AAAAAAAA\n"]],
    ),
    ("witness.verify_cosignatures", witness.verify_cosignatures, [_NOTE, [_W.vkey()], 0]),
]


@pytest.mark.parametrize(("name", "fn", "valid"), CASES, ids=[c[0] for c in CASES])
def test_valid_arguments_are_accepted_or_refused_with_a_saihm_error(name, fn, valid) -> None:
    _call(fn, valid)


@pytest.mark.parametrize(("name", "fn", "valid"), CASES, ids=[c[0] for c in CASES])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_hostile_arguments_raise_only_saihm_errors(name, fn, valid, data: st.DataObject) -> None:
    args, _ = with_hostile_arguments(data, HOSTILE, valid)
    _call(fn, args)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_hostile_bytes_to_the_note_and_checkpoint_parsers(raw: bytes) -> None:
    for fn in (note_mod.parse_note, witness.parse_add_checkpoint, witness.parse_cosignature_lines):
        _call(fn, [raw])
    _call(verify_checkpoint, [raw, _KEYS.verifier_keys()])
    _call(Checkpoint.parse, [raw])
    _call(tiles.decode_entry_bundle, [raw])


def test_proof_error_is_a_saihm_error_and_still_its_own_class() -> None:
    with pytest.raises(ProofError) as caught:
        verify_inclusion(leaf_hash(b"x"), 0, 5, _TREE.inclusion_proof(0), _ROOT)
    assert isinstance(caught.value, SaihmError) and not isinstance(caught.value, ValueError)


def test_wrong_types_are_malformed_input_named_by_the_function_not_a_type_error() -> None:
    with pytest.raises(MalformedInput, match="parse_tile_path"):
        tiles.parse_tile_path(None)  # type: ignore[arg-type]
    with pytest.raises(ProofError):
        verify_inclusion(leaf_hash(b"a"), 0, 5, None, _ROOT)  # type: ignore[arg-type]
    with pytest.raises(note_mod.NoteError):
        note_mod.parse_note("a str, not bytes")  # type: ignore[arg-type]
    with pytest.raises(MalformedInput):
        leaf_hash("text")  # type: ignore[arg-type]
