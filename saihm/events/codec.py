"""Deterministic CBOR (RFC 8949 §4.2.1, "core deterministic encoding") for saihm's data model.

The data model is the subset every saihm format needs: unsigned and negative integers that fit
in 64 bits, byte strings, text strings, arrays, maps, ``true``, ``false`` and ``null``. Floats,
tags, ``undefined``, other simple values and indefinite lengths are outside it.

``encode`` writes the shortest head for every integer and length, definite lengths only, and map
keys sorted by the bytewise lexicographic order of their encodings (§4.2.1; this differs from the
length-first order of RFC 7049 §3.9 that ``cbor2``'s ``canonical`` mode uses, for mixed key
types). ``decode`` accepts exactly the bytes ``encode`` would produce: it parses with ``cbor2``,
re-encodes the result and compares the bytes, so any non-shortest form, unsorted or duplicate
key, indefinite length, tag, float or trailing byte is rejected with ``DecodeError``.
"""

from __future__ import annotations

import struct
from typing import Any

import cbor2

from saihm.events.errors import DecodeError, EncodeError

__all__ = ["MAX_DEPTH", "U64_MAX", "decode", "decode_authenticated", "encode"]

#: Nesting bound for decoding; saihm's formats nest at most four levels.
MAX_DEPTH = 16

U64_MAX = 2**64 - 1


_ONE_BYTE = [bytes((i,)) for i in range(256)]


def _head(major: int, value: int) -> bytes:
    """The shortest head for ``major`` type with argument ``value`` (RFC 8949 §4.2.1)."""
    mt = major << 5
    if value < 24:
        return _ONE_BYTE[mt | value]
    if value <= 0xFF:
        return bytes((mt | 24, value))
    if value <= 0xFFFF:
        return bytes((mt | 25,)) + struct.pack(">H", value)
    if value <= 0xFFFFFFFF:
        return bytes((mt | 26,)) + struct.pack(">I", value)
    return bytes((mt | 27,)) + struct.pack(">Q", value)


def _encode(obj: Any, out: list[bytes], depth: int) -> None:
    # Dispatch on the exact type first: this runs for every item of every cell a recall opens.
    t = type(obj)
    if t is bytes:
        out.append(_head(2, len(obj)))
        out.append(obj)
    elif t is int:
        if 0 <= obj <= U64_MAX:
            out.append(_head(0, obj))
        elif -(2**64) <= obj < 0:
            out.append(_head(1, -1 - obj))
        else:
            raise EncodeError("integer outside the 64-bit CBOR range")
    elif t is str:
        try:
            data = obj.encode("utf-8")
        except UnicodeEncodeError as err:
            raise EncodeError("text is not valid UTF-8") from err
        out.append(_head(3, len(data)))
        out.append(data)
    elif t is dict:
        if depth >= MAX_DEPTH:
            raise EncodeError("value nests too deeply")
        items = []
        for key, value in obj.items():
            if type(key) is int and 0 <= key < 24:
                items.append((_ONE_BYTE[key], value))
            else:
                key_out: list[bytes] = []
                _encode(key, key_out, depth + 1)
                items.append((b"".join(key_out), value))
        items.sort(key=_first)
        for i in range(1, len(items)):
            if items[i][0] == items[i - 1][0]:
                raise EncodeError("map has two keys with the same encoding")
        out.append(_head(5, len(items)))
        for key_bytes, value in items:
            out.append(key_bytes)
            _encode(value, out, depth + 1)
    elif t is list:
        if depth >= MAX_DEPTH:
            raise EncodeError("value nests too deeply")
        out.append(_head(4, len(obj)))
        for item in obj:
            _encode(item, out, depth + 1)
    elif obj is None:
        out.append(b"\xf6")
    elif obj is True:
        out.append(b"\xf5")
    elif obj is False:
        out.append(b"\xf4")
    elif isinstance(obj, int):  # an int subclass (bools were handled above)
        _encode(int(obj), out, depth)
    elif isinstance(obj, bytearray | memoryview):
        _encode(bytes(obj), out, depth)
    elif isinstance(obj, str):
        _encode(str(obj), out, depth)
    elif isinstance(obj, list):
        _encode(list(obj), out, depth)
    elif isinstance(obj, dict):
        _encode(dict(obj), out, depth)
    else:
        raise EncodeError(f"type {type(obj).__name__} has no saihm CBOR encoding")


def _first(item: tuple[bytes, Any]) -> bytes:
    return item[0]


def encode(obj: Any) -> bytes:
    """The deterministic CBOR encoding of ``obj`` (RFC 8949 §4.2.1).

    Accepts ``int`` in [-2^64, 2^64 - 1], ``bytes``, ``str``, ``list``, ``dict``, ``bool`` and
    ``None``; raises ``EncodeError`` for anything else (floats, tuples, big integers, ...).
    """
    out: list[bytes] = []
    _encode(obj, out, 0)
    return b"".join(out)


def decode(data: bytes) -> Any:
    """Decode one deterministic CBOR item occupying all of ``data``.

    Returns ints, bytes, str, lists, dicts, bools and None. Raises ``DecodeError`` unless
    ``encode(result) == data``: non-canonical heads, unsorted or duplicate map keys, indefinite
    lengths, tags, floats, simple values other than true/false/null, invalid UTF-8 and trailing
    bytes are all rejected.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise DecodeError("CBOR input must be bytes")
    data = bytes(data)
    if not data:
        raise DecodeError("empty CBOR input")
    try:
        obj = cbor2.loads(
            data,
            max_depth=MAX_DEPTH,
            allow_indefinite=False,
            allow_duplicate_keys=False,
            tag_hook=_reject_tag,
        )
    except DecodeError:
        raise
    except Exception as err:  # cbor2 raises several unrelated types on malformed input
        raise DecodeError("input is not well-formed CBOR") from err
    try:
        again = encode(obj)
    except EncodeError as err:
        raise DecodeError("CBOR item outside saihm's data model") from err
    if again != data:
        raise DecodeError("CBOR input is not in deterministic encoding or has trailing bytes")
    return obj


def decode_authenticated(data: bytes) -> Any:
    """Decode bytes already authenticated as this operator's own deterministic encoding.

    Precondition: ``data`` passed an integrity check that only this operator's encoder could
    satisfy — an AES-GCM tag under a cell's DEK, or the store's HMAC memo of the exact bytes it
    wrote. Under it, the re-encoding comparison of :func:`decode` proves nothing new and is
    skipped; the item is still parsed with the same limits (no tags, no indefinite lengths, no
    duplicate keys), and every field is still validated by the model that reads it. Raises
    ``DecodeError``.
    """
    try:
        return cbor2.loads(
            bytes(data),
            max_depth=MAX_DEPTH,
            allow_indefinite=False,
            allow_duplicate_keys=False,
            tag_hook=_reject_tag,
        )
    except DecodeError:
        raise
    except Exception as err:
        raise DecodeError("input is not well-formed CBOR") from err


def _reject_tag(decoder: Any, tag: Any) -> Any:
    raise DecodeError("CBOR tags are not allowed")
