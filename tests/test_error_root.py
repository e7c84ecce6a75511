"""``errors.rejects``: malformed input leaves as the error root; a bug inside a parser does not.

A parser decorated with ``rejects`` turns the low-level errors bad input provokes into
``MalformedInput`` (or the error it names), so a caller sees one error root. A bug inside the
parser (an ``AttributeError`` or ``KeyError``) must not pass for bad input: a monitor would then
report a bad log where it should crash on its own bug.
"""

from __future__ import annotations

import binascii
import struct

import cbor2
import pytest

from saihm.errors import MalformedInput, SaihmError, rejects, require_type


class _Bad(SaihmError):
    pass


def test_an_attribute_error_inside_a_decorated_function_propagates_as_itself() -> None:
    @rejects()
    def parse(data: bytes) -> int:
        return data.no_such_method()  # type: ignore[attr-defined]  # the bug

    with pytest.raises(AttributeError) as caught:
        parse(b"input")
    assert not isinstance(caught.value, SaihmError)


def test_a_key_error_inside_a_decorated_function_propagates_as_itself() -> None:
    @rejects()
    def parse(data: bytes) -> int:
        return {}[data]  # type: ignore[no-any-return]  # the bug

    with pytest.raises(KeyError):
        parse(b"input")


@pytest.mark.parametrize(
    "low_level",
    [
        TypeError("t"),
        ValueError("v"),
        b"\xff".decode,  # UnicodeDecodeError
        lambda: binascii.a2b_base64(b"a", strict_mode=True),
        IndexError("i"),
        OverflowError("o"),
        lambda: struct.unpack(">Q", b""),
        lambda: cbor2.loads(b"\xff"),
    ],
)
def test_what_bad_input_provokes_leaves_as_the_named_error(low_level) -> None:
    @rejects(_Bad, what="the parser")
    def parse() -> None:
        if isinstance(low_level, Exception):
            raise low_level
        low_level()

    with pytest.raises(_Bad, match="the parser: malformed argument") as caught:
        parse()
    assert caught.value.__cause__ is not None


def test_require_type_names_the_argument_and_the_types_never_the_value() -> None:
    with pytest.raises(MalformedInput) as caught:
        require_type("secret text", (bytes, bytearray), "parse: body")
    assert str(caught.value) == "parse: body must be bytes or bytearray, not str"
    require_type(b"fine", (bytes, bytearray), "parse: body")
