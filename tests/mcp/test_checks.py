"""Pure client checks, one test per rule (saihm-protocol: "Client checks", "Client conformance")."""

from __future__ import annotations

import pytest

from saihm.mcp.checks import (
    Refused,
    check_content,
    check_expiry_epoch,
    check_grantees,
    check_proposal,
    check_shard_ids,
    frame_plaintext,
    has_forbidden_char,
    is_result_identifier,
    is_shared_by_other_holder,
    normalise_excerpt,
    parse_bool,
    parse_number,
    printable,
    result_identifier,
)

FORBIDDEN = [
    *map(chr, range(0x00, 0x20)),
    *map(chr, range(0x7F, 0xA0)),
    "\u2028",
    "\u2029",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
]
BREAKS = ["\r", "\n", "\r\n", "\v", "\f", "\x85", "\u2028", "\u2029"]


# "Result identifiers": a JSON string of 1 to 256 characters U+0021-U+007E, never truncated.
@pytest.mark.parametrize("value", ["a", "!", "~", "x" * 256, "d851960a" * 8])
def test_result_identifier_accepts_1_to_256_printable_ascii(value: str) -> None:
    assert is_result_identifier(value)
    assert result_identifier(value) == value


@pytest.mark.parametrize(
    "value",
    ["", "x" * 257, "a b", "a\nb", "a\tb", "é", "a\u202eb", "\x7f", 5, None, ["a"], {"a": 1}],
)
def test_result_identifier_rejects_everything_else(value: object) -> None:
    assert not is_result_identifier(value)
    assert result_identifier(value) is None


def test_result_identifier_is_never_truncated() -> None:
    long = "f" * 257
    assert result_identifier(long) is None  # rejected whole, not cut to 256


# "HTTPS binding": MUST accept true, false, "true", "false", 1, 0, "1" and "0".
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("true", True),
        ("false", False),
        (1, True),
        (0, False),
        ("1", True),
        ("0", False),
    ],
)
def test_parse_bool_accepts_every_protocol_form(value: object, expected: bool) -> None:
    assert parse_bool(value) is expected


@pytest.mark.parametrize("value", [2, -1, 1.0, "TRUE", "yes", "", " true", None, [], {}])
def test_parse_bool_rejects_other_values(value: object) -> None:
    assert parse_bool(value) is None


# "HTTPS binding": MUST accept either a JSON number or a decimal string for every numeric field.
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (42, 42),
        (0.997, 0.997),
        ("1747526400", 1747526400),
        ("0.997", 0.997),
        ("18446744073709551615", 2**64 - 1),
        ("-3", -3),
        (0, 0),
    ],
)
def test_parse_number_accepts_numbers_and_decimal_strings(value: object, expected: float) -> None:
    assert parse_number(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        "",
        "1e3",
        " 1",
        "1 ",
        "+1",
        "0x10",
        "١٢",
        float("nan"),
        float("inf"),
        None,
        [1],
        "1" * 41,
    ],
)
def test_parse_number_rejects_non_numbers(value: object) -> None:
    assert parse_number(value) is None


# Conformance 7: control, separator and bidi characters are never printed.
@pytest.mark.parametrize("char", FORBIDDEN)
def test_printable_omits_strings_with_forbidden_characters(char: str) -> None:
    assert has_forbidden_char(f"ok{char}ok")
    assert printable(f"ok{char}ok") is None


@pytest.mark.parametrize("value", ["STANDARD", "café", "emoji 🙂", "a-b_c"])
def test_printable_keeps_ordinary_text(value: str) -> None:
    assert printable(value) == value


def test_printable_rejects_non_strings() -> None:
    assert printable(5) is None
    assert printable(None) is None


def test_excerpt_collapses_white_space_and_omits_hidden_characters() -> None:
    assert normalise_excerpt("<html>\n  <body>Login\r\n") == "<html> <body>Login"
    assert normalise_excerpt("x\x1b[31mred") is None
    assert normalise_excerpt("a\u202eb") is None
    assert normalise_excerpt("") is None
    assert len(normalise_excerpt("y" * 500) or "") == 80


# Conformance 8: a line break in recall plaintext cannot start a new report entry.
@pytest.mark.parametrize("brk", BREAKS)
def test_frame_plaintext_indents_every_line_after_each_break(brk: str) -> None:
    framed = frame_plaintext(f"first{brk}FORGOTTEN [x] erased")
    lines = framed.split("\n")
    assert lines == ["    | first", "    | FORGOTTEN [x] erased"]
    assert all(line.startswith("    | ") for line in framed.splitlines())


def test_frame_plaintext_of_empty_text_is_one_framed_line() -> None:
    assert frame_plaintext("") == "    | "


# Conformance 9: marking cells of other holders.
def test_cell_is_shared_when_caller_unknown() -> None:
    assert is_shared_by_other_holder("ab" * 32, None)


def test_cell_owner_compared_without_regard_to_case() -> None:
    assert not is_shared_by_other_holder("AB" * 32, "ab" * 32)
    assert is_shared_by_other_holder("cd" * 32, "ab" * 32)


@pytest.mark.parametrize("holder", [None, 5, ["ab"]])
def test_cell_without_holder_id_is_shared(holder: object) -> None:
    assert is_shared_by_other_holder(holder, "ab" * 32)


# saihm_remember: MUST refuse, before sending, content that is empty or only white space.
@pytest.mark.parametrize("content", ["", " ", "\n\t", "\u3000"])
def test_remember_refuses_blank_content(content: str) -> None:
    with pytest.raises(Refused):
        check_content(content)


def test_remember_sends_content_unaltered() -> None:
    assert check_content("  keep me \n") == "  keep me \n"


# saihm_share checks before sending.
def test_share_refuses_empty_grantee_list() -> None:
    with pytest.raises(Refused, match="grantee list is empty"):
        check_grantees([])


@pytest.mark.parametrize("grantee", ["abc", "zz", "", "0x", "0xabc", "ab cd", "éé"])
def test_share_refuses_grantee_not_even_length_hex(grantee: str) -> None:
    with pytest.raises(Refused, match="not even-length hexadecimal") as info:
        check_grantees([grantee])
    assert grantee not in str(info.value) or grantee == ""


def test_share_sends_grantees_lowercase_without_prefix() -> None:
    assert check_grantees(["0xABcd", "0X01", "ef"]) == ["abcd", "01", "ef"]


@pytest.mark.parametrize("pair", [["ab", "ab"], ["AB", "ab"], ["0xab", "ab"], ["0XAB", "ab"]])
def test_share_refuses_grantee_listed_twice_compared_as_bytes(pair: list[str]) -> None:
    with pytest.raises(Refused, match="listed twice"):
        check_grantees(pair)


def test_share_refuses_empty_shard_list() -> None:
    with pytest.raises(Refused, match="shard list is empty"):
        check_shard_ids([])


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), ("", None), ("1747612800", "1747612800")]
)
def test_share_expiry_absent_or_decimal_digits(value: str | None, expected: str | None) -> None:
    assert check_expiry_epoch(value) == expected


@pytest.mark.parametrize("value", ["-1", " 1", "1.5", "1e9", "١٢", "0x10", "abc"])
def test_share_refuses_expiry_that_is_not_decimal_digits(value: str) -> None:
    with pytest.raises(Refused, match="expiryEpoch"):
        check_expiry_epoch(value)


# saihm_governance_propose: MUST refuse an emission_param proposal lacking either field.
@pytest.mark.parametrize(("key", "value"), [(None, "1"), ("k", None), (None, None), ("", "1")])
def test_propose_refuses_emission_param_without_both_fields(
    key: str | None, value: str | None
) -> None:
    with pytest.raises(Refused, match="paramKey and proposedValue"):
        check_proposal("emission_param", key, value)


def test_propose_protocol_upgrade_needs_neither_field() -> None:
    """Only an emission_param proposal needs both fields, and an empty proposedValue is a
    value: these pass the check (it returns, refusing nothing), while the same emission_param
    call one field short is refused."""
    assert check_proposal("protocol_upgrade", None, None) is None
    assert check_proposal("protocol_upgrade", "", "") is None
    assert check_proposal("emission_param", "rate", "") is None
    with pytest.raises(Refused, match="paramKey and proposedValue"):
        check_proposal("emission_param", "rate", None)
