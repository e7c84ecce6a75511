"""Signed notes (c2sp.org/signed-note) and checkpoints (c2sp.org/tlog-checkpoint).

Go's sumdb/note vectors and the C2SP example, round trips, every single-byte change to a real
two-signature checkpoint note, the unknown-key rules, malformed lines, verifier keys, checkpoint
bodies, the log's key files and ``verify_checkpoint``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import stat
import struct

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from saihm.errors import Conflict, NotFound
from saihm.translog import leaf_hash
from saihm.translog.checkpoint import (
    MLDSA44,
    Checkpoint,
    LogKeys,
    MLDSA44Verifier,
    _MLDSA44Signer,
    verifier_from_key,
    verify_checkpoint,
)
from saihm.translog.note import (
    ED25519,
    MAX_SIGNATURES,
    Ed25519Signer,
    Ed25519Verifier,
    NoteError,
    NoteSignature,
    key_id,
    open_note,
    parse_note,
    parse_vkey,
    sign_note,
)
from tests.translog.reftree import vectors_dir

GO = json.loads((vectors_dir() / "golang-mod-sumdb" / "note_and_tlog_vectors.json").read_text())
C2SP = json.loads((vectors_dir() / "c2sp" / "spec_examples.json").read_text())

DASH = "\u2014 "
ORIGIN = "example.com/log"
TIMESTAMP = 1_700_000_000


def seeded(label: str) -> bytes:
    return hashlib.sha256(label.encode()).digest()


def ed_signer(name: str, label: str | None = None) -> Ed25519Signer:
    key = Ed25519PrivateKey.from_private_bytes(seeded(label or name))
    return Ed25519Signer(name, key)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def sig_line(name: str, blob: bytes) -> bytes:
    return f"{DASH}{name} {b64(blob)}\n".encode()


POOL = [ed_signer(f"example.com/k{i}") for i in range(4)]
ALICE = ed_signer("example.com/alice")
BOB = ed_signer("example.com/bob")
MALLORY = ed_signer("example.com/mallory")
ROOT = leaf_hash(b"saihm")
CP = Checkpoint(ORIGIN, 123456, ROOT)


@pytest.fixture(scope="module")
def log_keys() -> LogKeys:
    return LogKeys(ORIGIN, Ed25519PrivateKey.from_private_bytes(seeded("log ed")), seeded("log ml"))


# -- Go sumdb/note and C2SP vectors ------------------------------------------------------------


def test_go_vector_resigning_is_byte_exact() -> None:
    peter = GO["keys"]["PeterNeumann"]
    signer = Ed25519Signer.from_skey(peter["skey"])
    assert signer.name == "PeterNeumann"
    assert signer.skey() == peter["skey"]
    assert signer.verifier.vkey() == peter["vkey"]
    note = sign_note(GO["text"].encode(), [signer])
    assert note == GO["signed_note_peter"].encode()


def test_go_vector_verifies() -> None:
    verifier = Ed25519Verifier.from_vkey(GO["keys"]["PeterNeumann"]["vkey"])
    text, verified = open_note(GO["signed_note_peter"].encode(), [verifier])
    assert text == GO["text"].encode()
    assert [(s.name, s.key_id) for s in verified] == [("PeterNeumann", verifier.key_id)]
    assert verifier.key_id.hex() == "c74f20a3"


def test_go_vector_with_a_second_signature() -> None:
    note = (GO["signed_note_peter"] + GO["signature_line_enoch"]).encode()
    peter = Ed25519Verifier.from_vkey(GO["keys"]["PeterNeumann"]["vkey"])
    enoch = Ed25519Verifier.from_vkey(GO["keys"]["EnochRoot"]["vkey"])
    text, verified = open_note(note, [peter, enoch])
    assert text == GO["text"].encode()
    assert [s.name for s in verified] == ["PeterNeumann", "EnochRoot"]
    for only in (peter, enoch):
        _, verified = open_note(note, [only])
        assert [s.name for s in verified] == [only.name]


@pytest.mark.parametrize("vkey", GO["bad_vkeys_must_reject"])
def test_go_bad_verifier_keys_are_rejected(vkey: str) -> None:
    with pytest.raises(NoteError):
        Ed25519Verifier.from_vkey(vkey)
    with pytest.raises(NoteError):
        verifier_from_key(vkey)


def test_c2sp_example_note_verifies() -> None:
    example = C2SP["signed_note_example"]
    verifier = Ed25519Verifier.from_vkey(example["vkey"])
    text, verified = open_note(example["note"].encode(), [verifier])
    assert text == b"This is an example message.\n"
    assert len(verified) == 1
    assert verified[0].key_id.hex() == "530d903a"


def test_go_tree_note_text_is_a_checkpoint_body() -> None:
    tree = GO["sumdb_tree_note"]
    cp = Checkpoint.parse(tree["text"].encode())
    assert cp.origin == "go.sum database tree"
    assert cp.size == tree["N"]
    assert cp.root_hash == leaf_hash(b"hello world")
    assert cp.body() == tree["text"].encode()


def test_c2sp_checkpoint_example_parses_but_no_key_of_ours_verifies(log_keys) -> None:
    note = C2SP["checkpoint_example_unverifiable"].encode()
    text, sigs = parse_note(note)
    cp = Checkpoint.parse(text)
    assert (cp.origin, cp.size) == ("example.com/behind-the-sofa", 20852163)
    assert [s.name for s in sigs] == ["example.com/behind-the-sofa"]
    with pytest.raises(NoteError):
        verify_checkpoint(note, log_keys.verifier_keys())


# -- round trips -------------------------------------------------------------------------------

LINE = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\n"),
    max_size=30,
)
TEXTS = st.lists(LINE, min_size=1, max_size=6).map(lambda ls: "".join(x + "\n" for x in ls))


@settings(max_examples=150, deadline=None)
@given(text=TEXTS.filter(lambda t: t != "\n"), picks=st.sets(st.integers(0, 3), min_size=1))
def test_sign_open_round_trip(text: str, picks: set[int]) -> None:
    signers = [POOL[i] for i in sorted(picks)]
    note = sign_note(text.encode(), signers)
    got, sigs = parse_note(note)
    assert got == text.encode()
    assert [(s.name, s.key_id) for s in sigs] == [(s.name, s.key_id) for s in signers]
    got, verified = open_note(note, [s.verifier for s in reversed(POOL)])
    assert got == text.encode()
    assert len(verified) == len(signers)


def test_text_may_contain_empty_lines_and_dash_lines() -> None:
    text = "Ognuno sta solo sul cuor della terra\n\ned è subito sera.\n\n— not a sig\n".encode()
    note = sign_note(text, [ALICE])
    assert open_note(note, [ALICE.verifier])[0] == text


@pytest.mark.parametrize(
    "text",
    [b"no final newline", b"", b"tab\there\n", b"cr\r\n", b"\xff\xfe\n", b"nul\x00\n"],
)
def test_sign_note_rejects_bad_text(text: bytes) -> None:
    with pytest.raises(NoteError):
        sign_note(text, [ALICE])


def test_sign_note_needs_a_signer() -> None:
    with pytest.raises(NoteError):
        sign_note(b"hello\n", [])


# -- every single-byte change ------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_line_note(log_keys):
    """The log's Ed25519 and ML-DSA-44 lines, then a line from a key the verifier does not know."""
    note = log_keys.sign(CP, timestamp=TIMESTAMP)
    foreign = sign_note(CP.body(), [ed_signer("example.com/witness")])
    note += foreign[len(CP.body()) + 1 :]
    return note


def test_three_line_note_verifies(log_keys, three_line_note) -> None:
    assert verify_checkpoint(three_line_note, log_keys.verifier_keys(), ORIGIN) == CP
    _, sigs = parse_note(three_line_note)
    assert len(sigs) == 3
    assert len(three_line_note) > 3000


def _check_mutations(note: bytes, positions, masks, vkeys: list[str]) -> tuple[int, int]:
    """Apply each mask at each position; return (rejected, accepted) counts.

    A mutated note may only be accepted if it yields the identical checkpoint and every
    signature line that changed is one whose (name, key ID) matches no verifier key.
    """
    known = {(v.name, v.key_id) for v in map(verifier_from_key, vkeys)}
    _, original = parse_note(note)
    body_end = len(CP.body())
    rejected = accepted = 0
    for pos in positions:
        for mask in masks:
            mutated = note[:pos] + bytes([note[pos] ^ mask]) + note[pos + 1 :]
            try:
                cp = verify_checkpoint(mutated, vkeys, ORIGIN)
            except NoteError:
                rejected += 1
                continue
            accepted += 1
            assert cp == CP, (pos, mask)
            assert pos > body_end, (pos, mask)
            _, sigs = parse_note(mutated)
            assert len(sigs) == len(original), (pos, mask)
            changed = [s for s, o in zip(sigs, original, strict=True) if s != o]
            assert changed, (pos, mask)
            for sig in changed:
                assert (sig.name, sig.key_id) not in known, (pos, mask, sig.name)
    return rejected, accepted


def test_every_single_byte_change_is_rejected_or_harmless(log_keys, three_line_note) -> None:
    note = three_line_note
    rejected, accepted = _check_mutations(
        note, range(len(note)), (0x01, 0x80), log_keys.verifier_keys()
    )
    assert rejected + accepted == 2 * len(note)
    # The foreign line is ignored whatever happens inside it (if it still parses).
    assert accepted > 0
    assert rejected > len(note)


def test_every_bit_of_the_text_and_ed25519_line_matters(log_keys, three_line_note) -> None:
    note = three_line_note
    ed_end = note.index(b"\n", len(CP.body()) + 1) + 1
    masks = tuple(1 << b for b in range(8))
    _check_mutations(note, range(ed_end), masks, log_keys.verifier_keys())


def test_mutations_of_known_lines_are_always_rejected(log_keys) -> None:
    note = log_keys.sign(CP, timestamp=TIMESTAMP)
    vkeys = log_keys.verifier_keys()
    _, accepted = _check_mutations(note, range(len(note)), (0x01,), vkeys)
    # A changed key name or key ID makes that line unknown (ignored); the other still verifies.
    # Everything else in a known line, and every byte of the text, must be rejected.
    assert accepted <= 2 * (len(ORIGIN) + 6)
    for i in (0, 1):
        only = [vkeys[i]]
        rejected, _ = _check_mutations(note, range(len(CP.body()) + 1), (0x01,), only)
        assert rejected == len(CP.body()) + 1


# -- unknown keys, bad signatures, many signatures ---------------------------------------------


def test_a_note_signed_only_by_unknown_keys_is_rejected() -> None:
    note = sign_note(b"hello\n", [MALLORY])
    with pytest.raises(NoteError):
        open_note(note, [ALICE.verifier, BOB.verifier])
    with pytest.raises(NoteError):
        open_note(note, [])


def test_unknown_keys_are_ignored_not_trusted() -> None:
    note = sign_note(b"hello\n", [MALLORY, ALICE])
    text, verified = open_note(note, [ALICE.verifier])
    assert text == b"hello\n"
    assert [s.name for s in verified] == [ALICE.name]


def test_same_name_or_same_id_alone_is_an_unknown_key() -> None:
    text = b"hello\n"
    good = sign_note(text, [ALICE])
    garbage = bytes(64)
    other_id = bytes(b ^ 0xFF for b in ALICE.key_id)
    same_name = sig_line(ALICE.name, other_id + garbage)
    same_id = sig_line("example.com/alias", ALICE.key_id + garbage)
    for extra in (same_name, same_id):
        got, verified = open_note(good + extra, [ALICE.verifier])
        assert got == text
        assert len(verified) == 1
        with pytest.raises(NoteError):
            open_note(text + b"\n" + extra, [ALICE.verifier])


def test_a_known_key_with_a_bad_signature_rejects_the_note() -> None:
    text = b"hello\n"
    good = sign_note(text, [ALICE])
    forged = sig_line(BOB.name, BOB.key_id + ALICE.sign(text))
    for note in (good + forged, text + b"\n" + forged + good[len(text) + 1 :]):
        with pytest.raises(NoteError):
            open_note(note, [ALICE.verifier, BOB.verifier])
        # Without Bob's key the forged line is unknown and ignored.
        assert open_note(note, [ALICE.verifier])[0] == text


def test_a_signature_over_other_text_is_rejected() -> None:
    note = sign_note(b"hello\n", [ALICE])
    swapped = b"hallo\n" + note[len(b"hello\n") :]
    with pytest.raises(NoteError):
        open_note(swapped, [ALICE.verifier])


@pytest.mark.parametrize("count", [16, 20, MAX_SIGNATURES])
def test_many_signatures_are_accepted(count: int) -> None:
    signers = [ed_signer(f"example.com/w{i}") for i in range(count)]
    note = sign_note(b"many\n", signers)
    text, verified = open_note(note, [s.verifier for s in signers])
    assert text == b"many\n"
    assert len(verified) == count


def test_more_than_the_maximum_signatures_is_rejected() -> None:
    signers = [ed_signer(f"example.com/w{i}") for i in range(MAX_SIGNATURES + 1)]
    note = sign_note(b"many\n", signers)
    with pytest.raises(NoteError):
        parse_note(note)


# -- malformed signature lines and blank lines -------------------------------------------------

_BLOB = b64(ALICE.key_id + ALICE.sign(b"hello\n"))
_NAME = ALICE.name
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _noncanonical(encoded: str) -> str:
    """The same bytes with a padding bit set: decodes, but is not the canonical encoding."""
    data = encoded.rstrip("=")
    pad = encoded[len(data) :]
    assert pad, "needs padding bits"
    last = _ALPHABET[_ALPHABET.index(data[-1]) | 1]
    out = data[:-1] + last + pad
    assert out != encoded and base64.b64decode(out) == base64.b64decode(encoded)
    return out


@pytest.mark.parametrize(
    "line",
    [
        f"{_NAME} {_BLOB}\n",  # no dash
        f"- {_NAME} {_BLOB}\n",  # hyphen, not em dash
        f"\u2013 {_NAME} {_BLOB}\n",  # en dash
        f"\u2014{_NAME} {_BLOB}\n",  # no space after the dash
        f"\u2014  {_NAME} {_BLOB}\n",  # two spaces after the dash (empty name)
        f"\u2014 {_NAME}  {_BLOB}\n",  # two spaces before the signature
        f"\u2014 {_NAME} {_BLOB} \n",  # trailing space
        f" \u2014 {_NAME} {_BLOB}\n",  # leading space
        f"\u2014 {_NAME}\n",  # no signature
        f"\u2014 {_NAME} \n",  # empty signature
        f"\u2014 {_NAME} {_BLOB} extra\n",  # three fields
        f"\u2014 {_NAME}\t{_BLOB}\n",  # tab
        f"\u2014 {_NAME} {_BLOB}\r\n",  # CRLF
        f"\u2014 {_NAME} {_BLOB.rstrip('=')}\n",  # unpadded base64
        f"\u2014 {_NAME} {_BLOB[:-2]}!=\n",  # not base64
        f"\u2014 {_NAME} {_BLOB[:10]} {_BLOB[10:]}\n",  # space inside base64
        f"\u2014 {_NAME} {_noncanonical(_BLOB)}\n",  # non-zero padding bits
        f"\u2014 {_NAME} AAAA\n",  # 3 bytes: shorter than a key ID
        f"\u2014 {_NAME} {b64(ALICE.key_id)}\n",  # key ID only, no signature byte
        f"\u2014 {_NAME} \u00e9{_BLOB[1:]}\n",  # non-ASCII in the base64
        f"\u2014 {_NAME} {_BLOB[:8]}\uff21{_BLOB[9:]}\n",  # fullwidth letter in the base64
        f"\u2014 a+b {_BLOB}\n",  # '+' in the key name
        f"\u2014 {_NAME}\u00a0x {_BLOB}\n",  # Unicode space in the key name
        f"\u2014 {_NAME} {_BLOB}",  # no final newline
    ],
)
def test_malformed_signature_lines_are_rejected(line: str) -> None:
    good = sign_note(b"hello\n", [ALICE])
    assert good == b"hello\n\n" + sig_line(_NAME, base64.b64decode(_BLOB))
    for note in (b"hello\n\n" + line.encode(), good + line.encode()):
        with pytest.raises(NoteError):
            parse_note(note)
        with pytest.raises(NoteError):
            open_note(note, [ALICE.verifier])


def test_blank_line_rules() -> None:
    text = b"hello\nworld\n"
    note = sign_note(text, [ALICE, BOB])
    sigs = note[len(text) + 1 :]
    first, second = sigs.splitlines(keepends=True)
    verifiers = [ALICE.verifier, BOB.verifier]
    assert open_note(note, verifiers)[0] == text
    bad = [
        text + sigs,  # no blank line
        text + b"\n" + sigs + b"\n",  # blank line after the signatures
        text + b"\n\n" + sigs,  # two blank lines: the text would be "…\n\n"
        text + b"\n" + first + b"\n" + second,  # blank line between signature lines
        text + b"\n",  # no signature lines
        b"\n" + sigs,  # empty text
        b"\n\n" + sigs,  # text is a single empty line
        text[:-1] + b"\n\n" + sigs[:-1],  # no final newline
    ]
    for mutated in bad:
        with pytest.raises(NoteError):
            open_note(mutated, verifiers)
    # A text that itself ends in a blank line signs and verifies as such.
    text2 = b"hello\n\n"
    note2 = sign_note(text2, [ALICE])
    assert note2.startswith(b"hello\n\n\n")
    assert open_note(note2, [ALICE.verifier])[0] == text2


# -- verifier keys -----------------------------------------------------------------------------


def _signer_with_plus_in_key() -> Ed25519Signer:
    for i in range(1000):
        signer = ed_signer("example.com/plus", f"plus {i}")
        if "+" in signer.verifier.vkey().split("+", 2)[2]:
            return signer
    raise AssertionError("no key with '+' in its base64")


def test_verifier_key_splits_on_plus_at_most_twice() -> None:
    signer = _signer_with_plus_in_key()
    vkey = signer.verifier.vkey()
    name, kid, sig_type, public = parse_vkey(vkey)
    assert (name, kid, sig_type) == ("example.com/plus", signer.key_id, ED25519)
    assert public == signer.verifier.public_key
    assert Ed25519Verifier.from_vkey(vkey).vkey() == vkey
    assert verifier_from_key(vkey).key_id == signer.key_id
    note = sign_note(b"plus\n", [signer])
    assert open_note(note, [Ed25519Verifier.from_vkey(vkey)])[0] == b"plus\n"


def test_key_id_is_the_spec_hash() -> None:
    public = ALICE.verifier.public_key
    want = hashlib.sha256(ALICE.name.encode() + b"\n\x01" + public).digest()[:4]
    assert ALICE.key_id == want == key_id(ALICE.name, ED25519, public)


def _vkey(name: str, kid: bytes, material: bytes) -> str:
    return f"{name}+{kid.hex()}+{b64(material)}"


def _bad_vkeys() -> list[str]:
    v = ALICE.verifier
    name, pub = v.name, v.public_key
    good = v.vkey()
    id_hex = v.key_id.hex()
    other_id = bytes(b ^ 1 for b in v.key_id)
    return [
        _vkey(name, other_id, b"\x01" + pub),  # wrong key ID
        good.replace(f"+{id_hex}+", f"+{id_hex.upper()}+"),  # upper-case hex
        good.replace(f"+{id_hex}+", f"+{id_hex[:7]}+"),  # 7 hex digits
        good.replace(f"+{id_hex}+", f"+{id_hex}0+"),  # 9 hex digits
        good.replace(f"+{id_hex}+", "+zzzzzzzz+"),  # not hex
        _vkey(name, v.key_id, b"\x02" + pub),  # type changed, ID not recomputed
        _vkey(name, key_id(name, 0x02, pub), b"\x02" + pub),  # consistent but not Ed25519
        _vkey(name, key_id(name, 0x01, pub[:31]), b"\x01" + pub[:31]),  # 31-byte key
        _vkey(name, key_id(name, 0x01, pub + b"\0"), b"\x01" + pub + b"\0"),  # 33-byte key
        _vkey(name, key_id(name, 0x01, b""), b"\x01"),  # no key
        good[:-1] + "!",  # not base64
        good[:-4],  # truncated base64
        good.split("+", 1)[1],  # no name
        f"+{id_hex}+{good.split('+', 2)[2]}",  # empty name
        f"bad name+{id_hex}+{good.split('+', 2)[2]}",  # space in the name
        f"{name}+{id_hex}",  # two parts
        name,  # one part
        "",
        good + "\u00e9",  # non-ASCII in the base64
        good.replace(f"+{id_hex}+", f"+{id_hex} +"),  # space after the ID
    ]


@pytest.mark.parametrize("vkey", _bad_vkeys())
def test_bad_verifier_keys_are_rejected(vkey: str) -> None:
    with pytest.raises(NoteError):
        Ed25519Verifier.from_vkey(vkey)
    with pytest.raises(NoteError):
        verifier_from_key(vkey)


def test_wrong_algorithm_byte_is_rejected_even_with_a_matching_id() -> None:
    pub = ALICE.verifier.public_key
    for sig_type in (0x00, 0x02, 0x04, 0x05, 0xFF):
        vkey = _vkey(ALICE.name, key_id(ALICE.name, sig_type, pub), bytes([sig_type]) + pub)
        assert parse_vkey(vkey)[2] == sig_type  # structurally fine
        with pytest.raises(NoteError):
            Ed25519Verifier.from_vkey(vkey)
        with pytest.raises(NoteError):
            verifier_from_key(vkey)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: s.replace("PRIVATE+KEY+", "PRIVATE+KEYS+"),
        lambda s: s.replace("PRIVATE+KEY+", ""),
        lambda s: s[:-1] + ("A" if s[-1] != "A" else "B"),  # another seed: ID mismatch
        lambda s: s.rsplit("+", 1)[0] + "+" + b64(b"\x06" + bytes(32)),  # ML-DSA type byte
        lambda s: s.rsplit("+", 1)[0] + "+" + b64(b"\x01" + bytes(31)),  # short seed
        lambda s: s.replace("+PeterNeumann+", "+Peter Neumann+"),
    ],
)
def test_bad_private_keys_are_rejected(mutate) -> None:
    skey = GO["keys"]["PeterNeumann"]["skey"]
    Ed25519Signer.from_skey(skey)
    with pytest.raises(NoteError):
        Ed25519Signer.from_skey(mutate(skey))


# -- checkpoints -------------------------------------------------------------------------------

_ROOT_B64 = b64(ROOT)


@pytest.mark.parametrize(
    "body",
    [
        f"\n5\n{_ROOT_B64}\n",  # empty origin
        f"{ORIGIN}\n05\n{_ROOT_B64}\n",  # leading zero
        f"{ORIGIN}\n00\n{_ROOT_B64}\n",
        f"{ORIGIN}\n-1\n{_ROOT_B64}\n",
        f"{ORIGIN}\n+5\n{_ROOT_B64}\n",
        f"{ORIGIN}\n 5\n{_ROOT_B64}\n",
        f"{ORIGIN}\n5 \n{_ROOT_B64}\n",
        f"{ORIGIN}\n0x5\n{_ROOT_B64}\n",
        f"{ORIGIN}\n1e3\n{_ROOT_B64}\n",
        f"{ORIGIN}\n1_000\n{_ROOT_B64}\n",
        f"{ORIGIN}\n\uff15\n{_ROOT_B64}\n",  # fullwidth digit
        f"{ORIGIN}\n\u0665\n{_ROOT_B64}\n",  # Arabic-Indic digit
        f"{ORIGIN}\n\n{_ROOT_B64}\n",  # empty size
        f"{ORIGIN}\n{1 << 64}\n{_ROOT_B64}\n",  # above u64
        f"{ORIGIN}\n5\n{b64(ROOT[:31])}\n",  # 31-byte root
        f"{ORIGIN}\n5\n{b64(ROOT + b'x')}\n",  # 33-byte root
        f"{ORIGIN}\n5\n\n",  # empty root
        f"{ORIGIN}\n5\n{_ROOT_B64.rstrip('=')}\n",  # unpadded
        f"{ORIGIN}\n5\n{_ROOT_B64[:-2]}!=\n",  # not base64
        f"{ORIGIN}\n5\n\u00e9{_ROOT_B64[1:]}\n",  # non-ASCII in the base64
        f"{ORIGIN}\n5\n{_ROOT_B64}",  # no final newline
        f"{ORIGIN}\n5\n{_ROOT_B64}\n\n",  # extra blank line at the end
        f"{ORIGIN}\n5\n{_ROOT_B64}\n\next\n",  # blank line before an extension
        f"{ORIGIN}\n5\n",  # no root line
        f"{ORIGIN}\n",
        "",
    ],
)
def test_checkpoint_parse_rejects(body: str) -> None:
    with pytest.raises(NoteError):
        Checkpoint.parse(body.encode())


def test_checkpoint_parse_rejects_invalid_utf8() -> None:
    with pytest.raises(NoteError):
        Checkpoint.parse(b"\xff\n5\n" + _ROOT_B64.encode() + b"\n")


@pytest.mark.parametrize("size", [0, 1, 10, (1 << 64) - 1])
def test_checkpoint_parse_accepts(size: int) -> None:
    body = f"{ORIGIN}\n{size}\n{_ROOT_B64}\nx ext\n".encode()
    cp = Checkpoint.parse(body)
    assert cp == Checkpoint(ORIGIN, size, ROOT, ("x ext",))
    assert cp.body() == body


@pytest.mark.parametrize(
    "kwargs",
    [
        {"origin": ""},
        {"origin": "a\nb"},
        {"size": -1},
        {"size": 1 << 64},
        {"root_hash": ROOT[:31]},
        {"extensions": ("",)},
        {"extensions": ("a\nb",)},
    ],
)
def test_checkpoint_constructor_rejects(kwargs) -> None:
    args = {"origin": ORIGIN, "size": 1, "root_hash": ROOT, **kwargs}
    with pytest.raises(NoteError):
        Checkpoint(**args)


SINGLE_LINE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    origin=SINGLE_LINE,
    size=st.integers(0, (1 << 64) - 1),
    root=st.binary(min_size=32, max_size=32),
    extensions=st.lists(SINGLE_LINE, max_size=3),
)
def test_checkpoint_body_round_trip(origin, size, root, extensions) -> None:
    cp = Checkpoint(origin, size, root, tuple(extensions))
    body = cp.body()
    assert body.endswith(b"\n")
    assert Checkpoint.parse(body) == cp
    assert Checkpoint.parse(body).body() == body


# -- the log's keys ----------------------------------------------------------------------------


def test_log_keys_save_load_round_trip(tmp_path, log_keys) -> None:
    log_keys.save(tmp_path)
    for name in ("checkpoint-ed25519.key", "checkpoint-mldsa44.key"):
        mode = stat.S_IMODE((tmp_path / name).stat().st_mode)
        assert mode == 0o600, (name, oct(mode))
        assert (tmp_path / name).read_text().startswith(f"PRIVATE+KEY+{ORIGIN}+")
    listed = (tmp_path / "checkpoint-verifier-keys.txt").read_text().splitlines()
    assert listed == log_keys.verifier_keys()
    loaded = LogKeys.load(tmp_path)
    assert loaded.origin == ORIGIN
    assert loaded.verifier_keys() == log_keys.verifier_keys()
    # Ed25519 is deterministic: the first signature line is identical.
    a = log_keys.sign(CP, timestamp=TIMESTAMP)
    b = loaded.sign(CP, timestamp=TIMESTAMP)
    assert parse_note(a)[1][0] == parse_note(b)[1][0]
    assert verify_checkpoint(b, log_keys.verifier_keys(), ORIGIN) == CP


def test_log_keys_save_refuses_to_overwrite(tmp_path, log_keys) -> None:
    log_keys.save(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    other = LogKeys.generate(ORIGIN)
    with pytest.raises(Conflict):
        other.save(tmp_path)
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert after == before
    assert LogKeys.load(tmp_path).verifier_keys() == log_keys.verifier_keys()


def test_log_keys_load_missing_or_tampered(tmp_path, log_keys) -> None:
    with pytest.raises(NotFound):
        LogKeys.load(tmp_path / "nowhere")
    log_keys.save(tmp_path)
    ml = tmp_path / "checkpoint-mldsa44.key"
    text = ml.read_text()
    ml.write_text(text.replace(f"+{ORIGIN}+", "+example.com/other+"))
    with pytest.raises(NoteError):
        LogKeys.load(tmp_path)
    prefix = text.strip().rsplit("+", 1)[0]
    ml.write_text(prefix + "+" + b64(b"\x06" + bytes(32)) + "\n")
    with pytest.raises(NoteError):
        LogKeys.load(tmp_path)


def test_generated_keys_differ() -> None:
    a, b = LogKeys.generate(ORIGIN), LogKeys.generate(ORIGIN)
    assert set(a.verifier_keys()).isdisjoint(b.verifier_keys())


def test_verifier_keys_parse_back(log_keys) -> None:
    ed, ml = log_keys.verifier_keys()
    v_ed, v_ml = verifier_from_key(ed), verifier_from_key(ml)
    assert isinstance(v_ed, Ed25519Verifier)
    assert isinstance(v_ml, MLDSA44Verifier)
    assert (v_ed.name, v_ml.name) == (ORIGIN, ORIGIN)
    assert (v_ed.sig_type, v_ml.sig_type) == (ED25519, MLDSA44)
    assert (v_ed.vkey(), v_ml.vkey()) == (ed, ml)
    assert len(v_ml.public_key) == 1312
    for vkey, t in ((ed, ED25519), (ml, MLDSA44)):
        name, kid, sig_type, public = parse_vkey(vkey)
        assert (name, sig_type) == (ORIGIN, t)
        assert kid == key_id(name, t, public)
    # The note's two lines carry exactly these key IDs, Ed25519 first.
    _, sigs = parse_note(log_keys.sign(CP, timestamp=TIMESTAMP))
    assert [(s.name, s.key_id) for s in sigs] == [(ORIGIN, v_ed.key_id), (ORIGIN, v_ml.key_id)]
    assert len(sigs[0].signature) == 64
    assert len(sigs[1].signature) == 8 + 2420
    assert struct.unpack(">Q", sigs[1].signature[:8])[0] == TIMESTAMP


def test_log_keys_sign_refuses_other_origins_and_extensions(log_keys) -> None:
    with pytest.raises(NoteError):
        log_keys.sign(Checkpoint("example.com/other", 1, ROOT))
    with pytest.raises(NoteError):
        log_keys.sign(Checkpoint(ORIGIN, 1, ROOT, ("ext",)))


# -- verify_checkpoint -------------------------------------------------------------------------


def test_verify_checkpoint_with_each_key_alone(log_keys) -> None:
    note = log_keys.sign(CP, timestamp=TIMESTAMP)
    ed, ml = log_keys.verifier_keys()
    assert verify_checkpoint(note, [ed, ml], ORIGIN) == CP
    assert verify_checkpoint(note, [ml, ed]) == CP
    assert verify_checkpoint(note, [ml], ORIGIN) == CP
    assert verify_checkpoint(note, [ed], ORIGIN) == CP


def test_verify_checkpoint_wrong_origin(log_keys) -> None:
    note = log_keys.sign(CP, timestamp=TIMESTAMP)
    for origin in ("example.com/other", ORIGIN + "/", ""):
        with pytest.raises(NoteError):
            verify_checkpoint(note, log_keys.verifier_keys(), origin)


def test_verify_checkpoint_with_a_foreign_key_set(log_keys) -> None:
    note = log_keys.sign(CP, timestamp=TIMESTAMP)
    foreign = LogKeys(ORIGIN, Ed25519PrivateKey.from_private_bytes(seeded("f")), seeded("g"))
    with pytest.raises(NoteError):
        verify_checkpoint(note, foreign.verifier_keys(), ORIGIN)
    for k in foreign.verifier_keys():
        with pytest.raises(NoteError):
            verify_checkpoint(note, [k], ORIGIN)
    with pytest.raises(NoteError):
        verify_checkpoint(note, [], ORIGIN)


def test_verify_checkpoint_rejects_a_body_that_is_not_a_checkpoint(log_keys) -> None:
    ed_key = Ed25519PrivateKey.from_private_bytes(seeded("log ed"))
    note = sign_note(b"hello\n", [Ed25519Signer(ORIGIN, ed_key)])
    with pytest.raises(NoteError):
        verify_checkpoint(note, log_keys.verifier_keys())


def test_ml_dsa_signature_over_another_checkpoint_is_rejected(log_keys) -> None:
    a = log_keys.sign(CP, timestamp=TIMESTAMP)
    b = log_keys.sign(Checkpoint(ORIGIN, CP.size + 1, ROOT), timestamp=TIMESTAMP)
    ml_line_b = b.splitlines(keepends=True)[-1]
    spliced = a.rsplit(b"\n", 2)[0] + b"\n" + ml_line_b
    assert spliced.count(b"\n") == a.count(b"\n")
    ml = log_keys.verifier_keys()[1]
    with pytest.raises(NoteError):
        verify_checkpoint(spliced, [ml], ORIGIN)
    with pytest.raises(NoteError):
        verify_checkpoint(spliced, log_keys.verifier_keys(), ORIGIN)


def test_extensions_need_a_verified_ed25519_signature(log_keys) -> None:
    cp = Checkpoint(ORIGIN, 7, ROOT, ("ext line",))
    ed_key = Ed25519PrivateKey.from_private_bytes(seeded("log ed"))
    ed, ml = log_keys.verifier_keys()
    by_ed = sign_note(cp.body(), [Ed25519Signer(ORIGIN, ed_key)])
    assert verify_checkpoint(by_ed, [ed, ml], ORIGIN) == cp
    by_ml = sign_note(cp.body(), [_MLDSA44Signer(ORIGIN, seeded("log ml"), TIMESTAMP)])
    with pytest.raises(NoteError):
        verify_checkpoint(by_ml, [ed, ml], ORIGIN)
    # The same ML-DSA signature without the extension line is fine.
    plain = Checkpoint(ORIGIN, 7, ROOT)
    moved = plain.body() + by_ml[len(cp.body()) :]
    assert verify_checkpoint(moved, [ml], ORIGIN) == plain


def test_note_signature_dataclass_shape() -> None:
    _, sigs = parse_note(sign_note(b"x\n", [ALICE]))
    assert sigs == [NoteSignature(ALICE.name, ALICE.key_id, ALICE.sign(b"x\n"))]


def test_sign_note_refuses_the_empty_text_that_parse_note_refuses() -> None:
    """What sign_note writes, parse_note reads: an empty text is refused on both sides."""
    signer = ed_signer("example.com/empty")
    with pytest.raises(NoteError, match="empty"):
        sign_note(b"\n", [signer])
    with pytest.raises(NoteError, match="empty"):
        parse_note(b"\n\n\xe2\x80\x94 example.com/empty AAAAAAAA\n")
