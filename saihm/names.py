"""Namespaces are names: the one rule for a namespace label, wherever one enters.

A namespace is shown to people (the person's page, the MCP report, ``saihm`` output) and
compared byte for byte, so a label that renders as something else, or as nothing, is refused
before anything is written (docs/formats.md "Namespaces"). Every entry point calls
:func:`check_namespace`: the HTTP binding's ``namespace`` and ``namespaces`` params, the
operator's write and grant paths, the MCP server's tool arguments, the memory provider, the
authority's grants and the command line. Labels stored before this rule are still read and
shown (marked) by the person's page; they cannot be written or granted again.

A shared leaf (it imports only saihm.errors), so the client side may use it too.
"""

from __future__ import annotations

import unicodedata

from saihm.errors import ErrorCode, MalformedInput

__all__ = ["NAMESPACE_MAX", "BadNamespace", "check_namespace", "namespace_problem"]

#: The longest namespace, in code points (Unicode scalar values; at most 1,024 UTF-8 bytes).
NAMESPACE_MAX = 256

#: Categories refused anywhere: control (Cc), format (Cf: bidi controls, zero-width
#: characters, tags), surrogate (Cs), private use (Co), unassigned (Cn), and the line and
#: paragraph separators (Zl, Zp).
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})

#: Characters of other categories that render as nothing: the combining grapheme joiner,
#: the Hangul fillers and the Khmer inherent vowels.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0")


class BadNamespace(MalformedInput):
    """A namespace that breaks the rule of :func:`check_namespace` (400 ``bad_namespace``);
    ``str()`` says which part, never quoting the label (it may hold control characters)."""

    code = ErrorCode.BAD_NAMESPACE


def namespace_problem(value: object) -> str | None:
    """Why ``value`` is not a namespace, or None when it is one.

    A namespace is a ``str`` of 1 to :data:`NAMESPACE_MAX` code points, with no leading or
    trailing whitespace, whose every character is printable: not control, format, surrogate,
    private-use or unassigned, not a line or paragraph separator, not a space other than
    U+0020 and not one of the few other characters that render as nothing. Categories are
    those of the running Python's Unicode database.
    """
    if not isinstance(value, str):
        return "a namespace is a string"
    if not value:
        return "a namespace is not empty"
    if len(value) > NAMESPACE_MAX:
        return f"a namespace is at most {NAMESPACE_MAX} characters"
    if value != value.strip():
        return "a namespace does not start or end with whitespace"
    for char in value:
        category = unicodedata.category(char)
        if category in _REFUSED_CATEGORIES or char in _INVISIBLE:
            return (
                f"a namespace holds only printable characters (U+{ord(char):04X} is not: "
                "no control, format, bidi, invisible, private-use or unassigned character)"
            )
        if category == "Zs" and char != " ":
            return f"a namespace's only space is U+0020 (U+{ord(char):04X} is not)"
    return None


def check_namespace(value: object) -> str:
    """``value`` when it is a namespace (:func:`namespace_problem`); raises
    :class:`BadNamespace` otherwise."""
    problem = namespace_problem(value)
    if problem is not None:
        raise BadNamespace(problem)
    assert isinstance(value, str)  # namespace_problem refused every non-string
    return value
