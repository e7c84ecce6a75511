"""The ML-DSA-44 checkpoint line, byte for byte against c2sp.org/tlog-cosignature, checked with
pqcrypto, an ML-DSA implementation independent of the one that signed it."""

from __future__ import annotations

import struct

from pqcrypto.sign.ml_dsa_44 import verify as pq_verify

from saihm.translog import Checkpoint, LogKeys, leaf_hash
from saihm.translog.checkpoint import cosigned_message
from saihm.translog.note import parse_note, parse_vkey

ORIGIN = "log.example/saihm"
TIMESTAMP = 1_700_000_000


def test_the_mldsa44_line_signs_the_subtree_v1_message_laid_out_in_the_spec() -> None:
    """tlog-cosignature "ML-DSA-44 signed message": label "subtree/v1\\n\\0", the cosigner
    name and the log origin each behind a 1-byte length, u64 timestamp, u64 start = 0 and
    u64 end = tree size for a checkpoint, then the hash; the signature is a
    timestamped_signature (u64 timestamp || 2,420 bytes), pure ML-DSA with the empty context."""
    keys = LogKeys.generate(ORIGIN)
    checkpoint = Checkpoint(ORIGIN, 1234, leaf_hash(b"root"))
    note = keys.sign(checkpoint, timestamp=TIMESTAMP)

    name = ORIGIN.encode()
    message = (
        b"subtree/v1\n\x00"
        + bytes([len(name)])
        + name
        + struct.pack(">Q", TIMESTAMP)
        + bytes([len(name)])
        + name
        + struct.pack(">QQ", 0, checkpoint.size)
        + checkpoint.root_hash
    )
    assert cosigned_message(ORIGIN, TIMESTAMP, ORIGIN, 1234, checkpoint.root_hash) == message

    _, key_id, sig_type, public_key = parse_vkey(keys.verifier_keys()[1])
    assert (sig_type, len(public_key)) == (0x06, 1312)
    (line,) = [s for s in parse_note(note)[1] if s.key_id == key_id]
    assert line.name == ORIGIN
    assert line.signature[:8] == struct.pack(">Q", TIMESTAMP)
    assert len(line.signature) == 8 + 2420
    pq_verify(public_key, message, line.signature[8:], context=b"")
